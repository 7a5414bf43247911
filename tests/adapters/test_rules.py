"""Tests for dahl.adapters._rules: the offline rule Splitter."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dahl.adapters._base import Splitter
from dahl.adapters._rules import RuleSplitter, split_claims
from dahl.records import Answer, Claim

REPO = Path(__file__).resolve().parents[2]


def texts(text: str) -> list[str]:
    return [claim for claim, _, _ in split_claims(text)]


class TestSplitClaims:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            (
                "Aspirin causes nausea, headache, and dizziness.",
                ["Aspirin causes nausea", "Aspirin causes headache", "Aspirin causes dizziness."],
            ),
            (
                "Risk factors include smoking, obesity and age.",
                ["Risk factors include smoking", "Risk factors include obesity", "Risk factors include age."],
            ),
            (
                "The patient is completely unconscious and immobile.",
                ["The patient is completely unconscious", "The patient is immobile."],
            ),
        ],
        ids=["oxford-comma-list", "list-without-oxford-comma", "dahl-paper-pair"],
    )
    def test_lists_carry_prefix(self, text: str, expected: list[str]) -> None:
        """A clear list becomes one claim per item, each with the shared prefix."""
        assert texts(text) == expected

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            (
                "Sheehan has been married twice and has two children.",
                ["Sheehan has been married twice", "Sheehan has two children."],
            ),
            (
                "Metformin lowers glucose; it is also cheap.",
                ["Metformin lowers glucose", "it is also cheap."],
            ),
            (
                "He joined the army in 1990, and he served for ten years.",
                ["He joined the army", "He joined the army in 1990", "he served for ten years."],
            ),
            (
                "Doug Sheehan is an American actor who was born in Santa Monica.",
                ["Doug Sheehan is an American actor", "Doug Sheehan was born in Santa Monica."],
            ),
        ],
        ids=["shared-subject", "semicolon", "comma-and-clause", "copular-who"],
    )
    def test_clauses(self, text: str, expected: list[str]) -> None:
        """Coordinated clauses with their own verbs become separate claims."""
        assert texts(text) == expected

    @pytest.mark.parametrize(
        "text",
        [
            "It was studied between 1985 and 2014.",
            "He has written and arranged hundreds of songs.",
        ],
        ids=["number-range", "two-verbs-one-object"],
    )
    def test_not_split(self, text: str) -> None:
        """Commas and 'and' that do not separate claims or list items are left alone."""
        assert texts(text) == [text]

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("He married Jane, who was an actress.", ["He married Jane", "Jane was an actress."]),
            (
                "Aspirin, which inhibits COX-1, reduces fever.",
                ["Aspirin inhibits COX-1", "Aspirin reduces fever."],
            ),
            (
                "Doug Sheehan, an American actor, was born in Santa Monica.",
                ["Doug Sheehan was an American actor", "Doug Sheehan was born in Santa Monica."],
            ),
            (
                "Metformin lowers blood glucose, reducing the risk of complications.",
                ["Metformin lowers blood glucose", "Metformin reduces the risk of complications."],
            ),
            ("He moved to Rome, where he taught Latin.", ["He moved to Rome", "he taught Latin."]),
            (
                "He was born on July 27, 1942, in Pensacola, Florida.",
                ["He was born on July 27, 1942", "He was born in Pensacola", "Pensacola is in Florida."],
            ),
            (
                "Insulin is secreted by beta cells in the pancreas during fasting.",
                [
                    "Insulin is secreted by beta cells",
                    "The beta cells are in the pancreas",
                    "Insulin is secreted during fasting.",
                ],
            ),
        ],
        ids=[
            "relative-after-object", "relative-after-subject", "appositive", "participle",
            "where-clause", "date-and-place", "two-time-place-phrases",
        ],
    )
    def test_modifiers(self, text: str, expected: list[str]) -> None:
        """Relative clauses, appositives, participles and time/place phrases become claims."""
        assert texts(text) == expected

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            (
                "Tim Fischer (born 3 May 1946) is an Australian politician.",
                ["Tim Fischer was born 3 May 1946", "Tim Fischer is an Australian politician."],
            ),
            (
                "Takeo Miki (1907-1988) was a Japanese politician.",
                [
                    "Takeo Miki was born in 1907", "Takeo Miki died in 1988",
                    "Takeo Miki was a Japanese politician.",
                ],
            ),
            (
                "He was the son of Quintus Sosius and the brother of Lucius Sosius.",
                ["He was the son of Quintus Sosius", "He was the brother of Lucius Sosius."],
            ),
            (
                "She is known for her work in genetics and immunology.",
                [
                    "She is known for her work",
                    "Her work is in genetics",
                    "Her work is in immunology.",
                ],
            ),
            (
                "Taral Hicks is an American actress and singer born on September 21, 1974.",
                ["Taral Hicks is an American actress", "Taral Hicks is a singer born on September 21, 1974."],
            ),
        ],
        ids=["born-parenthesis", "life-span", "coordinated-noun-phrases", "coordinated-objects", "article-added"],
    )
    def test_parentheses_and_coordination(self, text: str, expected: list[str]) -> None:
        """A '(born ...)' or life span after the subject and 'A and B' conjuncts become claims."""
        assert texts(text) == expected

    def test_lists_after_including(self) -> None:
        """After 'including', four comma items need no final 'and'; commas in '(...)' stay; a title's year is a claim."""
        text = "She starred in films including Tru (2003, US), Bring It On (2000), Wrong Turn, Giallo."
        assert texts(text) == [
            "She starred in films",
            "Tru is among films",
            "She starred in films including Tru (2003, US)",
            "Bring It On is among films",
            "She starred in films including Bring It On",
            "Bring It On is from 2000",
            "Wrong Turn is among films",
            "She starred in films including Wrong Turn",
            "Giallo is among films",
            "She starred in films including Giallo.",
        ]

    def test_list_after_comma_including(self) -> None:
        """', including A, B, and C' after a noun: per item, a claim that it is of that kind (owning its connector) and the item's claim."""
        text = "He has managed a number of clubs in Italy, including Parma, Bologna, Empoli, and Milan."
        assert split_claims(text) == [
            ("He has managed a number of clubs", (0, 32), 0),
            ("He has managed a number of clubs in Italy", (33, 41), 0),
            ("Parma is among a number of clubs in Italy", (43, 52), 0),  # "including"
            ("He has managed a number of clubs in Italy, including Parma", (53, 58), 0),
            ("Bologna is among a number of clubs in Italy", (58, 59), 0),  # ","
            ("He has managed a number of clubs in Italy, including Bologna", (60, 67), 0),
            ("Empoli is among a number of clubs in Italy", (67, 68), 0),
            ("He has managed a number of clubs in Italy, including Empoli", (69, 75), 0),
            ("Milan is among a number of clubs in Italy", (75, 80), 0),  # ", and"
            ("He has managed a number of clubs in Italy, including Milan.", (81, 87), 0),
        ]

    def test_quoted_titles_are_names(self) -> None:
        """Words inside a quoted title are no verb or preposition ("The Blue Rose", "Like a Boss")."""
        text = 'She appeared in films such as "The Blue Rose" (2017) and "Like a Boss" (2020).'
        assert texts(text) == [
            "She appeared in films",
            '"The Blue Rose" is among films',
            'She appeared in films such as "The Blue Rose"',
            "The Blue Rose is from 2017",
            '"Like a Boss" is among films',
            'She appeared in films such as "Like a Boss"',
            "Like a Boss is from 2020",
        ]

    def test_list_commas_inside_quotes(self) -> None:
        """'"A," "B," and "C."' (the comma inside the closing quote) is a list all the same."""
        text = 'Palmer gained recognition for films such as "I Am Number Four," "Warm Bodies," and "Hacksaw Ridge."'
        assert split_claims(text) == [
            ("Palmer gained recognition", (0, 25), 0),
            ("Palmer gained recognition for films", (26, 35), 0),
            ('"I Am Number Four" is among films', (36, 43), 0),
            ('Palmer gained recognition for films such as "I Am Number Four,"', (44, 61), 0),
            # The comma inside the closing quote is the separator: the next membership claim owns it.
            ('"Warm Bodies" is among films', (61, 63), 0),
            ('Palmer gained recognition for films such as "Warm Bodies,"', (64, 76), 0),
            ('"Hacksaw Ridge" is among films', (76, 82), 0),
            ('Palmer gained recognition for films such as "Hacksaw Ridge."', (83, 99), 0),
        ]

    def test_such_noun_as(self) -> None:
        """'such classic films as A, B, and C' is a list introduced like 'such as'."""
        text = "He starred in such classic films as The Sea Hawk (1940), Robin Hood (1938), and Captain Blood (1935)."
        assert texts(text) == [
            "He starred in such classic films as The Sea Hawk",  # its span: "He starred in"
            "The Sea Hawk is among classic films",  # its span: "such classic films as The Sea Hawk"
            "The Sea Hawk is from 1940",
            "Robin Hood is among classic films",
            "He starred in such classic films as Robin Hood",
            "Robin Hood is from 1938",
            "Captain Blood is among classic films",
            "He starred in such classic films as Captain Blood",
            "Captain Blood is from 1935",
        ]

    def test_preposition_inside_a_name(self) -> None:
        """No phrase cut between two capitalized words ('Minister of State for Social Justice'); a month is a date."""
        assert texts("She served as the Minister of State for Social Justice in the past.") == [
            "She served as the Minister of State for Social Justice",
            "She served as the Minister of State for Social Justice in the past.",
        ]
        assert texts("He moved to London in March 1990.") == ["He moved to London", "He moved to London in March 1990."]

    def test_born_after_a_name(self) -> None:
        """A '(born ...)' after a name later in the sentence dates that person."""
        text = "They have a daughter named Francesca (born January 19, 2015)."
        assert texts(text) == ["They have a daughter named Francesca", "Francesca was born January 19, 2015"]

    def test_quoted_name_after_noun(self) -> None:
        """'the reality TV show "X"' names the show: a claim of its own, owning the title's span."""
        text = 'He won the reality TV show "New Zealand Idol" in 2004.'
        assert split_claims(text) == [
            ("He won the reality TV show", (0, 26), 0),
            ('The reality TV show is "New Zealand Idol"', (27, 45), 0),
            ("He won the reality TV show in 2004.", (46, 54), 0),
        ]
        # An unquoted name after "the/his ... <noun>" too; capitals inside the noun phrase do not count.
        text = "Cheney is the lead vocalist of the rockabilly band The Living End, which he formed in 1994."
        assert texts(text)[:2] == ["Cheney is the lead vocalist of the rockabilly band", "The rockabilly band is The Living End"]
        assert texts("He married his wife Jane Doe in 1990.") == [
            "He married his wife", "His wife is Jane Doe", "He married his wife in 1990.",
        ]
        # A word that names by itself, or a verb, before the quote gives no naming claim.
        assert texts('He released a single called "Sukiyaki".') == ['He released a single called "Sukiyaki".']

    def test_non_claims_dropped_and_intro_carried(self) -> None:
        """Chatter and headings go; an intro ending with ':' is carried into verbless items."""
        text = (
            "Sure! Here is a summary:\nCommon side effects include:\n- nausea\n- headache\n"
            "1. Smoking causes cancer."
        )
        assert split_claims(text) == [
            ("Common side effects include nausea", (56, 62), 3),
            ("Common side effects include headache", (65, 73), 4),
            ("Smoking causes cancer.", (77, 99), 5),
        ]

    def test_questions_headings_markup_citations(self) -> None:
        """Questions, markdown headings and 'I hope this helps' go; ** and [n] are stripped."""
        text = "What is X? Zinc is a metal [1][2].\n**Overview**\n# Heading\nI hope this helps!"
        assert split_claims(text) == [("Zinc is a metal.", (11, 34), 1)]

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("Certainly, smoking causes cancer.", ["Certainly, smoking causes cancer."]),
            ("Sure, here is a bio of Ada Lovelace. She was a mathematician.", ["She was a mathematician."]),
        ],
        ids=["interjection-with-content", "sure-here-is"],
    )
    def test_chatter_only_when_chatter(self, text: str, expected: list[str]) -> None:
        """'Sure, here is ...' is dropped; a claim opening with 'Certainly,' is kept."""
        assert texts(text) == expected

    def test_spans_point_into_text(self) -> None:
        """Each claim's span runs from its own first word to the next claim's; the first holds the head."""
        text = "Aspirin causes nausea, headache, and dizziness."
        assert [text[a:b] for _, (a, b), _ in split_claims(text)] == [
            "Aspirin causes nausea",
            "headache",
            "dizziness.",
        ]

    def test_empty(self) -> None:
        """Blank text has no claims."""
        assert split_claims("  \n") == []


class TestExampleRegressions:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            (
                "Patients with strabismus amblyopia showed a significant underestimation of visual acuity.",
                ["Patients with strabismus amblyopia showed a significant underestimation of visual acuity."],
            ),
            (
                "Small differences in the lower visual acuity range have to be considered.",
                ["Small differences in the lower visual acuity range have to be considered."],
            ),
            (
                "Metformin lowers hepatic glucose production and improves insulin sensitivity.",
                ["Metformin lowers hepatic glucose production", "Metformin improves insulin sensitivity."],
            ),
            (
                "Cystic fibrosis is an autosomal recessive disease caused by mutations in the CFTR gene.",
                [
                    "Cystic fibrosis is an autosomal recessive disease caused by mutations",
                    "The mutations are in the CFTR gene.",
                ],
            ),
            (
                "H. pylori is a Gram-negative, spiral-shaped bacterium that produces urease, which "
                "neutralizes gastric acid around the organism. Infection is a major cause of peptic "
                "ulcer disease and a risk factor for gastric cancer.",
                [
                    "H. pylori is a Gram-negative, spiral-shaped bacterium",
                    "H. pylori is a Gram-negative, spiral-shaped bacterium that produces urease",
                    "urease neutralizes gastric acid around the organism.",
                    "Infection is a major cause of peptic ulcer disease",
                    "Infection is a risk factor",
                    "Infection is a risk factor for gastric cancer.",
                ],
            ),
            (
                "Warfarin inhibits vitamin K epoxide reductase, reducing the synthesis of clotting "
                "factors II, VII, IX and X. Its effect is monitored with the international normalized "
                "ratio (INR).",
                [
                    "Warfarin inhibits vitamin K epoxide reductase",
                    "Warfarin reduces the synthesis of clotting factors II, VII, IX and X.",
                    "Its effect is monitored with the international normalized ratio (INR).",
                ],
            ),
        ],
        ids=["no-cut-after-a-verbless-subject", "no-cut-after-a-verbless-subject-2", "verb-phrase-repeats-subject",
             "participle-keeps-its-phrases", "copular-noun-phrases", "participle-conjugated-and-roman-numeral-stop"],
    )
    def test_examples(self, text: str, expected: list[str]) -> None:
        """The README example and MedHallu answers give whole, grammatical claims (rules/v7): no
        claim is a bare subject ("Patients") cut off before its phrase."""
        assert texts(text) == expected

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            (
                "He won the title, earning a medal.",
                ["He won the title", "He earned a medal."],
            ),
            (
                "It blocks the enzyme, inhibiting growth.",
                ["It blocks the enzyme, inhibiting growth."],
            ),
            (
                "Teresa Palmer is an Australian actress, writer, model and activist.",
                [
                    "Teresa Palmer is an Australian actress", "Teresa Palmer is a writer",
                    "Teresa Palmer is a model", "Teresa Palmer is an activist.",
                ],
            ),
            (
                "He has since been re-elected in several federal elections.",
                ["He has since been re-elected in several federal elections."],
            ),
        ],
        ids=["past-participle-phrase", "unsure-conjugation-kept", "list-articles", "since-adverb"],
    )
    def test_unsure_not_split(self, text: str, expected: list[str]) -> None:
        """An '-ing' phrase is conjugated or kept; list items get articles; adverbial 'since' stays."""
        assert texts(text) == expected


class TestAdverbsAndLeadingParticiples:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("He is a doctor and later moved to Paris.", ["He is a doctor", "He later moved to Paris."]),
            ("She was born in Ohio and quickly became famous.", ["She was born in Ohio", "She quickly became famous."]),
            (
                "He is the only child of his family and legally changed his name.",
                ["He is the only child of his family", "He legally changed his name."],
            ),
            ("He is an actor and also a singer.", ["He is an actor", "He is also a singer."]),
            ("She is an actress, a singer, and also a model.", ["She is an actress", "She is a singer", "She is also a model."]),
            ("Ketamine sedation was successful and well tolerated in all cases.",
             ["Ketamine sedation was successful", "Ketamine sedation was well tolerated in all cases."]),
            ("Rigidity may be a significant and previously unreported factor.",
             ["Rigidity may be a significant", "Rigidity may be a previously unreported factor."]),
            ("LUS is an accurate and highly sensitive procedure.", ["LUS is an accurate", "LUS is a highly sensitive procedure."]),
            ("Markers were significantly but modestly associated with turnover.",
             ["Markers were significantly but modestly associated with turnover."]),
            ("The theory was controversial and later abandoned by most physicists.",
             ["The theory was controversial", "The theory was later abandoned by most physicists."]),
            ("The cells were washed twice and then incubated with the antibody.",
             ["The cells were washed twice", "The cells were then incubated with the antibody."]),
            ("He was arrested in 1980 and later released on bail.", ["He was arrested in 1980", "He was later released on bail."]),
            ("He was a student of Freud, who later moved to London.", ["He was a student of Freud", "Freud later moved to London."]),
            ("Shayne Neumann is a politician who currently serves as an MP.",
             ["Shayne Neumann is a politician", "Shayne Neumann currently serves as an MP."]),
            ("He never returned to the majors, and retired in 2009.", ["He never returned to the majors", "He retired in 2009."]),
        ],
        ids=["later-moved", "quickly-became", "legally-changed", "also-a-singer", "list-also",
             "shared-copula", "adjective-after-adverb", "article-before-adverb", "but-adverb-participle",
             "passive-shares-was", "passive-shares-were", "passive-after-phrase", "comma-who-is-the-noun",
             "who-after-copula", "adverb-stays-with-its-clause"],
    )
    def test_adverb_before_the_second_predicate(self, text: str, expected: list[str]) -> None:
        """"and <adverb> <verb>" opens a predicate of the subject, not a conjunct of the object; an
        "-ed" word after an adverb may be an adjective or share the copula before it (carried with the
        subject); ", who" is about the noun before it; an adverb stays with its own clause; "and also
        a singer" keeps its own article."""
        assert texts(text) == expected

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            (
                "Born in 1948, Ra Jong-yil studied political science.",
                ["Ra Jong-yil was born in 1948", "Ra Jong-yil studied political science."],
            ),
            (
                "Born on October 9, 1983 in El Tigre, Anzoátegui, she is the daughter of two athletes.",
                ["She was born on October 9, 1983", "She was born in El Tigre", "El Tigre is in Anzoátegui",
                 "She is the daughter of two athletes."],
            ),
            ("Born and raised in Ohio, she became a nurse.", ["She was born and raised in Ohio", "She became a nurse."]),
            ("Born to a poor family, it was hard.", ["Born to a poor family, it was hard."]),
            ("Born in 1950, his father was a coal miner.", ["Born in 1950, his father was a coal miner."]),
            ("Born in 1943, she and her sister founded a school.", ["Born in 1943, she and her sister founded a school."]),
            ("Raised Catholic, she later converted to Buddhism.", ["She was raised Catholic", "She later converted to Buddhism."]),
        ],
        ids=["born-year", "born-date-and-place", "born-and-raised", "no-person-subject", "dangling-possessive",
             "two-people", "adverb-not-in-subject"],
    )
    def test_leading_born_phrase(self, text: str, expected: list[str]) -> None:
        """A leading "Born ...," phrase is a claim about the subject after it, the subject found past
        the commas of its date and place ("Born in Central Kenya" is not a claim)."""
        assert texts(text) == expected


class TestRuleSplitter:
    async def test_split(self) -> None:
        """split() numbers the claims and keeps spans and sentence indexes."""
        answer = Answer(id="a1", question="q", response="Zinc is a metal. It is grey and shiny.")
        claims = await RuleSplitter().split(answer)
        assert claims == [
            Claim(text="Zinc is a metal.", index=0, span=(0, 16), sentence=0),
            Claim(text="It is grey", index=1, span=(17, 27), sentence=1),
            Claim(text="It is shiny.", index=2, span=(32, 38), sentence=1),
        ]

    def test_protocol_and_fingerprint(self) -> None:
        """RuleSplitter satisfies the Splitter protocol with fingerprint rules/v9."""
        splitter = RuleSplitter()
        assert isinstance(splitter, Splitter)
        assert splitter.fingerprint == "rules/v9"


class TestAgainstFactScoreHumans:
    @pytest.mark.timeout(300)
    def test_counts_track_human_atomic_facts(self, shared_data: Path) -> None:
        """Pooled r and mean count ratio vs human facts stay at the measured level."""
        out = subprocess.run(
            [sys.executable, "-m", "bench.splitter_eval", str(shared_data)],
            cwd=REPO, capture_output=True, text=True, check=True,
        )
        pooled = json.loads(out.stdout)["human"]["all"]
        # The reference figures (set-up check): InstructGPT facts r = 0.62, sentences r = 0.51.
        assert round(pooled["instructgpt_facts"]["pearson_r"], 2) == 0.62
        assert round(pooled["sentences"]["pearson_r"], 2) == 0.51
        # Measured (rules/v9): r = 0.6546, mean ratio 0.9102 on 352 answers (127 + 110 + 115);
        # rules/v8 (same counts as rules/v7, before "and later <verb>" and a leading "Born ...,"): 0.6560, 0.9093;
        # rules/v6 cut before a phrase after a verbless subject ("Patients | with ..."): 0.6637, 0.9219;
        # before the ", including A, B and C" list, the list-membership and quoted-name rules: 0.6037, 0.8734;
        # rules/v5 had r = 0.5481, mean ratio 0.8788 (its growing prefixes counted more claims);
        # rules/v4 r = 0.5045, mean ratio 0.6147; rules/v3 r = 0.5028, mean ratio 0.6554.
        assert pooled["rules"]["n"] == 352
        assert round(pooled["rules"]["pearson_r"], 4) == 0.6546
        assert round(pooled["rules"]["mean_ratio"], 4) == 0.9102


def _prefix_pairs(text: str) -> list[tuple[str, str]]:
    """(shorter, longer) claims of one sentence where the shorter one's words begin the longer one's."""
    claims = split_claims(text)
    words = [re.findall(r"\w+", claim) for claim, _, _ in claims]
    return [
        (a[0], b[0])
        for i, a in enumerate(claims)
        for j, b in enumerate(claims)
        if i != j and a[2] == b[2] and len(words[j]) > len(words[i]) and words[j][: len(words[i])] == words[i]
    ]


_SUBJECTS = st.sampled_from(["She", "The tumor", "Aspirin", "He"])
_VERBS = st.sampled_from(["earned", "measured", "is", "received"])
_OBJECTS = st.sampled_from(["a Ph.D.", "approx. 5 cm", "a degree", "an advocate", "a drug"])
_PHRASES = st.lists(
    st.sampled_from(["in physics", "in diameter", "from MIT", "in 1990", "for diversity", "with honors"]),
    min_size=0, max_size=3, unique=True,
)

# Known limitation: where an extension cannot be stated on its own as a natural fact (a number,
# "The song topped the charts in 1963"), the shorter claim still begins the longer one. Merging
# those costs the claim count its match with the human facts (rules/v8: mean ratio 0.909 ->
# 0.811, see ARCHITECTURE.md, "The rule Splitter"); strict xfail so the fix removes these markers.
_PREFIX_LIMITATION = pytest.mark.xfail(
    strict=True, reason="the rule Splitter writes a claim and its phrase-extended form side by side"
)


class TestNoPrefixClaims:
    @pytest.mark.parametrize(
        "text",
        [
            pytest.param("The tumor measured approx. 5 cm in diameter.", marks=_PREFIX_LIMITATION),
            "She earned a Ph.D. in physics.",
            "Samantha is an Indian actress who works in Tamil films.",
            "Insulin binds receptors on muscle cells in the liver.",
        ],
        ids=["approx-5-cm", "ph-d", "who-after-copula", "noun-phrases"],
    )
    def test_no_truncated_claim_beside_the_whole_sentence(self, text: str) -> None:
        """A sentence with one phrase gives no claim cut short beside the whole sentence."""
        assert _prefix_pairs(text) == []

    @_PREFIX_LIMITATION
    @settings(derandomize=True, max_examples=60, deadline=None)
    @given(_SUBJECTS, _VERBS, _OBJECTS, _PHRASES)
    def test_no_claim_is_a_prefix_of_another_in_its_sentence(
        self, subject: str, verb: str, obj: str, phrases: list[str]
    ) -> None:
        """No claim's words begin another claim of the same sentence."""
        text = " ".join([subject, verb, obj, *phrases]).rstrip(".") + "."
        assert _prefix_pairs(text) == []
