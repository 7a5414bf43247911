"""The question checks: context-dependence families, duplicate keys and clusters, categories."""

from __future__ import annotations

import pytest

from dahl.errors import ConfigError
from dahl.questions._checks import (
    CATEGORIES,
    CONTEXT_FLAGS,
    OTHER,
    canonical_category,
    context_flags,
    duplicate_clusters,
    exact_duplicates,
    question_key,
)


class TestContextFlags:
    @pytest.mark.parametrize(("question", "flags"), [
        ("Describe the surgical approach used in the case report.", ["context_reference"]),
        ("What were the main limitations of this study?", ["context_reference"]),
        ("What treatment options are mentioned for asthma?", ["context_verb"]),
        ("Which biomarkers were identified in patients with sepsis?", ["context_finding"]),
        ("According to the authors, what is the definition of anaemia?", ["context_reference", "context_basis"]),
        ("Based on the findings of the study, which genes were identified?",
         ["context_reference", "context_finding", "context_basis"]),
        ("What is the mechanism of action of metformin?", []),
        ("Discuss the study of epigenetics in cancer.", []),  # "the study of X" names a field
        ("Why does removing the constant term shorten the dead zone? This results in two pulses.", []),
    ], ids=["case-report", "this-study", "mentioned", "were-identified", "according-to", "three-families",
            "clean", "study-of-a-field", "results-in-is-a-verb"])
    def test_families(self, question: str, flags: list[str]) -> None:
        """Each DAHL §3.2.2 family (and dahl's basis family) flags its phrase, in family order."""
        assert context_flags(question) == flags

    @pytest.mark.parametrize("question", [
        "Based on the DSM-5 criteria, list the requirements for a diagnosis of Major Depressive Disorder.",
        "According to WHO, what is the definition of anaemia?",
        "According to the European Society of Cardiology (ESC) guidelines, how is acute PE stratified?",
        "Based on the American Joint Committee on Cancer (AJCC) staging, 8th edition, what does T4N3M0 mean?",
        "According to the ASA 2008 pre-anesthesia checkout procedure guidelines, what is checked?",
    ], ids=["dsm-5-criteria", "who", "esc-guidelines", "ajcc-staging", "words-before-guidelines"])
    def test_named_standard_is_no_reference(self, question: str) -> None:
        """"based on / according to" a named standard, criteria or body does not point at the article."""
        assert context_flags(question) == []

    @pytest.mark.parametrize("question", [
        "Based on the DAPA-CKD trial, how does dapagliflozin act?",
        "Based on the Kaplan-Meier survival curves, was there a difference in recurrence?",
        "According to Smith et al., what is the incidence of gout?",
        "Depending on the severity, how is asthma treated?",
    ], ids=["named-trial", "named-curves", "et-al", "unnamed"])
    def test_named_study_is_still_a_reference(self, question: str) -> None:
        """A named trial, the article's curves, its authors, or no name at all: still flagged."""
        assert context_flags(question) == ["context_basis"]

    def test_flag_names(self) -> None:
        """The four flags are named in family order."""
        assert CONTEXT_FLAGS == ("context_reference", "context_verb", "context_finding", "context_basis")


class TestDuplicates:
    def test_key_folds_case_unicode_and_space(self) -> None:
        """The key is NFC, case-folded, with whitespace collapsed: a decomposed é equals a composed one."""
        assert question_key("  What  is CAF\u0065\u0301?\n") == question_key("what is caf\u00e9?") == "what is café?"

    def test_exact_duplicates_point_at_first(self) -> None:
        """Each repeat points at the first question with its key; first occurrences get None."""
        qs = ["What is A?", "What is B?", "what is  a?", "WHAT IS B?", "What is A?"]
        assert exact_duplicates(qs) == [None, None, 0, 1, 0]

    def test_near_duplicates_cluster(self) -> None:
        """A variant without "a" (ratio 98.5 >= 95) joins its cluster; a different question does not."""
        qs = ["What are the risk factors for developing a neonatal liver abscess?",
              "What are the risk factors for developing neonatal liver abscess?",
              "What is the mechanism of action of metformin?",
              "what are the risk factors for developing a neonatal liver abscess?"]
        assert duplicate_clusters(qs) == [0, 0, 2, 0]

    def test_threshold_100_is_exact_only(self) -> None:
        """With near=100 only equal keys share a cluster."""
        qs = ["What is the role of IL-6?", "What is the role of IL-6 ?", "what is the role of il-6?"]
        assert duplicate_clusters(qs, near=100) == [0, 1, 0]

    def test_threshold_out_of_range(self) -> None:
        """A threshold outside [0, 100] is a ConfigError naming it."""
        with pytest.raises(ConfigError, match="got 101"):
            duplicate_clusters(["a"], near=101)


class TestCategories:
    def test_twenty_eight_and_other(self) -> None:
        """The paper's 28 fields and "other": 29 distinct canonical names."""
        assert len(CATEGORIES) == len(set(CATEGORIES)) == 29
        assert OTHER in CATEGORIES

    @pytest.mark.parametrize(("label", "canonical"), [
        ("ENT(Ear, Nose, Throat)", "ent"),
        ("O&G(Obstetrics and Gynaecology)", "obstetrics gynaecology"),
        ("PSM(Preventive and Social Medicine)", "preventive and social medicine"),
        ("Bio-Statistics", "bio-statistics"),
        ("statistics", "bio-statistics"),
        ("Anesthesia", "anaesthesia"),
        ("  Public   Health ", "public health"),
        ("Other", "other"),
        ("ambiguous", None),
        ("astrology", None),
    ], ids=lambda v: str(v))
    def test_canonical_spelling(self, label: str, canonical: str | None) -> None:
        """The paper's spellings and common variants map to the canonical name; unknown labels to None."""
        assert canonical_category(label) == canonical
