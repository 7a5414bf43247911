"""Tests for the evidence Checker's features and learned support model."""

from __future__ import annotations

import hashlib
import importlib.resources
import json

import numpy as np
import pytest

from dahl.adapters._support import (
    CLASSES,
    FEATURE_NAMES,
    claim_terms,
    load_support_model,
    names_with_digits,
    numbers_with_units,
    pair_features,
    parse_support_model,
)
from dahl.errors import ConfigError
from tests.conftest import require_data


def features(claim: str, passage: str) -> dict[str, float]:
    vector, _ = pair_features(claim_terms(claim), passage, (passage,), 2.0, 4.0, lambda t: 1.0)
    return dict(zip(FEATURE_NAMES, vector.tolist(), strict=True))


class TestNamesAndNumbers:
    def test_names_with_digits_stay_whole(self) -> None:
        """COVID-19, SARS-CoV-2, IL-6 and H1N1 are names, lower-cased, in order."""
        assert names_with_digits("COVID-19 and SARS-CoV-2 raise IL-6; H1N1 does not.") == [
            "covid-19", "sars-cov-2", "il-6", "h1n1"
        ]

    def test_numbers_keep_units_and_skip_names(self) -> None:
        """'30%', '5 mg', '2.5 days' and '2020' are numbers; the 19 of COVID-19 and the 6 of IL-6 are not."""
        assert numbers_with_units("COVID-19 kills 30% of 5 mg users over 2.5 days in 2020; IL-6 rises") == [
            ("30", "%"), ("5", "mg"), ("2.5", "days"), ("2020", "")
        ]

    def test_decimal_comma_and_percent_word(self) -> None:
        """'0,5 percent' reads as ('0.5', '%')."""
        assert numbers_with_units("about 0,5 percent") == [("0.5", "%")]


class TestPairFeatures:
    def test_vector_matches_names(self) -> None:
        """One value per feature name."""
        vector, _ = pair_features(claim_terms("Aspirin helps."), "Aspirin helps.", ("Aspirin helps.",), 1.0, 1.0, lambda t: 1.0)
        assert vector.shape == (len(FEATURE_NAMES),)

    def test_covid_19_without_19_in_evidence_is_not_a_missing_number(self) -> None:
        """A name with digits found whole is no number mismatch; bm25 2 / idf 4 = 0.5."""
        f = features("COVID-19 spreads through droplets.", "COVID-19 spreads through droplets.")
        assert f["claim_has_number"] == 0.0 and f["number_missing_share"] == 0.0
        assert f["name_digit_share"] == 1.0 and f["name_digit_missing"] == 0.0
        assert f["content_share"] == 1.0 and f["bm25_per_idf"] == 0.5

    def test_wrong_number_and_unit(self) -> None:
        """'2.5 mg' against '5 mg': the number is missing; '5 g' against '5 mg': a unit mismatch."""
        assert features("The dose is 2.5 mg.", "The dose is 5 mg.")["number_missing_share"] == 1.0
        f = features("The dose is 5 g.", "The dose is 5 mg.")
        assert f["number_missing_share"] == 0.0 and f["number_unit_mismatch"] == 1.0

    def test_negation_and_opposites(self) -> None:
        """'does not reduce' vs 'reduces' is a negation mismatch; 'safe' vs 'teratogenic' one antonym conflict."""
        f = features("Aspirin does not reduce pain.", "Aspirin reduces pain.")
        assert f["claim_negated"] == 1.0 and f["sentence_negated"] == 0.0 and f["negation_mismatch"] == 1.0
        assert features("Warfarin is safe.", "Warfarin is teratogenic.")["antonym_conflicts"] == 1.0

    def test_refutation_cue(self) -> None:
        """'There is no evidence that ...' in the passage is a refutation cue."""
        assert features("Garlic cures COVID-19.", "There is no evidence that garlic protects.")["passage_refute_cue"] == 1.0


class TestSupportModel:
    def test_probabilities_sum_to_one(self) -> None:
        """Each row of probabilities has 3 classes summing to 1."""
        model = load_support_model()
        x = np.zeros((4, len(FEATURE_NAMES)))
        p = model.probabilities(x)
        assert p.shape == (4, len(CLASSES))
        np.testing.assert_allclose(p.sum(axis=1), 1.0)

    def test_shipped_file_is_small_and_records_its_training(self) -> None:
        """The model file is < 1 MB and names command, seed, split and a SHA-256 per training file."""
        data = importlib.resources.files("dahl.adapters").joinpath("support_model.json").read_bytes()
        assert len(data) < 1_000_000
        training = json.loads(data)["training"]
        assert training["command"].startswith("python -m bench.train_checker")
        assert training["seed"] == 0 and "sha256" in training["split"]
        assert set(training["files"]) == {
            "healthver/healthver_dev.csv", "healthver/healthver_test.csv",
            "covidfact/COVIDFACT_dataset.jsonl", "factcheck-gpt/subtasks/subtask3_claim_evidence_stance.jsonl",
        }

    def test_training_hashes_match_the_shared_data(self) -> None:
        """Each recorded SHA-256 is that of the shared data file."""
        training = load_support_model().training
        for name, digest in training["files"].items():
            assert hashlib.sha256(require_data(name).read_bytes()).hexdigest() == digest

    def test_model_for_other_features_is_a_config_error(self) -> None:
        """A file whose feature list differs is refused with a retrain hint."""
        raw = json.loads(importlib.resources.files("dahl.adapters").joinpath("support_model.json").read_bytes())
        raw["features"] = raw["features"][:-1]
        with pytest.raises(ConfigError, match="retrain"):
            parse_support_model(json.dumps(raw).encode())

    def test_malformed_file_is_a_config_error(self) -> None:
        """Bytes that are not a model raise ConfigError."""
        with pytest.raises(ConfigError, match="malformed"):
            parse_support_model(b"{}")


class TestHealthVerSplit:
    def test_no_claim_in_both_parts(self) -> None:
        """Rows of one claim share a part; about 30 % of claims are held back."""
        require_data("healthver/healthver_dev.csv")
        from bench.train_checker import healthver_rows
        from tests.conftest import shared_data_dir

        rows = healthver_rows(shared_data_dir())
        parts: dict[str, set[str]] = {}
        for r in rows:
            parts.setdefault(r["claim"].strip(), set()).add(r["part"])
        assert all(len(p) == 1 for p in parts.values())
        held = sum(p == {"heldout"} for p in parts.values())
        assert (held, len(parts)) == (89, 322)


# Measured with python -m bench.offline_eval --healthver (support/v1 model, 690 held-back rows):
# three-way from the verdict (supported / unsupported contradicted / anything else), and from the
# support model's own class for the deciding passage.
HEALTHVER_HELDOUT = {"accuracy": 0.4971, "macro_f1": 0.4141, "supports_vs_refutes_accuracy": 0.6489}
HEALTHVER_HELDOUT_MODEL_CLASS = {"accuracy": 0.5174, "macro_f1": 0.4442, "supports_vs_refutes_accuracy": 0.6489}


class TestHealthVerFigures:
    def test_held_back_figures_pinned(self) -> None:
        """3-way accuracy, macro-F1 and Supports-vs-Refutes accuracy on the held-back part, as measured;
        the 3-way label is the verdict's (its reason tells Refutes from Neutral)."""
        require_data("healthver/healthver_dev.csv")
        from bench.healthver_eval import healthver_figures
        from tests.conftest import shared_data_dir

        figures = healthver_figures(shared_data_dir(), "heldout")
        assert figures["rows"] == 690
        assert figures["evidence_checker"] == HEALTHVER_HELDOUT
        assert figures["predicted"] == {"Supports": 183, "Refutes": 77, "Neutral": 430}
        assert figures["supports_vs_refutes_from_reason"] == 0.5815
        assert figures["model_class"] == HEALTHVER_HELDOUT_MODEL_CLASS
        assert figures["baseline_majority_neutral"]["macro_f1"] == 0.2174
