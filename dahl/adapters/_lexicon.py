"""Word lists of the offline evidence Checker (:mod:`dahl.adapters._evidence`).

Every list is kept as index terms (:func:`~dahl.adapters._corpus.analyze`:
lowercased, stemmed), so it compares directly with a claim's and a passage's terms.
"""

from __future__ import annotations

import re

from dahl.adapters._corpus import analyze

__all__ = ["ANTONYMS", "NEGATION", "NON_ASSERTION", "NON_CONTENT", "NUMBER"]

# Function words that carry no checkable content (analyze() already drops bm25s's English list).
_FUNCTION_WORDS = frozenset(
    analyze(
        "was were has have had been being do does did this these those which who whom "
        "whose what when where why how its our we us you your he she his her they them "
        "may might can could would should shall will also than more most both between "
        "however from all any each other such only very some there here while whereas "
        "therefore thus hence about after before during over under within into onto "
        "upon via per among well even much many"
    )
)
# Hedges and reporting words (Hyland 1998, "Hedging in Scientific Research Articles"): they
# say how a finding is asserted, not what it asserts, and conclusions use them freely.
_STANCE_WORDS = frozenset(
    analyze(
        "suggest suggests suggested indicate indicates indicated show shows showed shown "
        "demonstrate demonstrates demonstrated reveal revealed observed report reported "
        "result results finding findings data study studies evidence conclusion conclusions "
        "conclude concluded may might appear appears seem seems likely possibly possible "
        "probably overall present current our"
    )
)
#: Negation cues ("not", "no", "never", "without", ..., "n't").
NEGATION = re.compile(
    r"\b(?:not|no|never|without|neither|nor|none|cannot)\b|n't\b", re.IGNORECASE
)
#: Terms that never count as a claim's content: function words, hedges, reporting words.
NON_CONTENT = _FUNCTION_WORDS | _STANCE_WORDS
# Sentences that state an aim or ask a question assert nothing: a negation in them
# ("to determine whether X does not ...") says nothing about the finding.
NON_ASSERTION = re.compile(
    r"\A\W*(?:to (?:determine|assess|evaluate|investigate|examine|compare|test|explore|identify"
    r"|study|analy[sz]e|describe|clarify|establish|estimate)\b"
    r"|(?:the |our |this )?(?:aims?|objectives?|purposes?|goals?)\b)"
    r"|\bwhether\b|\?\W*\Z",
    re.IGNORECASE,
)
#: A term holding a digit is a number and must match exactly.
NUMBER = re.compile(r"\d")

# Opposites that flip a claim while keeping its other words (stemmed like index terms).
# A claim term missing from the evidence whose opposite the evidence holds -> unsupported.
_OPPOSITES = (
    ("positive", "negative"), ("increase", "decrease"), ("higher", "lower"), ("high", "low"),
    ("more", "less"), ("greater", "smaller"), ("larger", "smaller"), ("above", "below"),
    ("benign", "malignant"), ("acute", "chronic"), ("dominant", "recessive"), ("gain", "loss"),
    ("activate", "inhibit"), ("stimulate", "inhibit"), ("agonist", "antagonist"),
    ("hypertension", "hypotension"), ("hyperglycemia", "hypoglycemia"),
    ("upregulate", "downregulate"), ("overestimation", "underestimation"),
    ("overestimate", "underestimate"), ("maximum", "minimum"), ("safe", "unsafe"),
    ("safe", "teratogenic"), ("effective", "ineffective"), ("present", "absent"),
    ("presence", "absence"), ("male", "female"), ("men", "women"), ("anterior", "posterior"),
    ("proximal", "distal"), ("systolic", "diastolic"), ("better", "worse"), ("improve", "worsen"),
)


def _opposites() -> dict[str, frozenset[str]]:
    table: dict[str, set[str]] = {}
    for a, b in _OPPOSITES:
        (sa,), (sb,) = analyze(a), analyze(b)
        table.setdefault(sa, set()).add(sb)
        table.setdefault(sb, set()).add(sa)
    return {k: frozenset(v) for k, v in table.items()}


#: Stemmed term -> its stemmed opposites (both directions of :data:`_OPPOSITES`).
ANTONYMS = _opposites()
