"""Tests for dahl.adapters._nli: the nli Checker over tiny real ONNX models built by the test (no download)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from dahl.adapters._corpus import Corpus
from dahl.adapters._nli import NLIChecker, NLIModel, read_folder
from dahl.cache._keys import check_key
from dahl.cli import main
from dahl.config import load_config, load_nli
from dahl.errors import AdapterError, ConfigError
from dahl.records import Answer, Claim, Label, UnsupportedReason
from dahl.run._eval_config import load_eval_config
from dahl.run._plan import AdapterSettings
from tests.adapters.nli_models import MINICHECK_LABELS, build_model

REPO = Path(__file__).resolve().parents[2]
DOCS = [
    ("sky", "", "The sky is blue yes."),
    ("grass", "", "The grass is green no."),
    ("filler", "", "Lactic filler."),
    ("long", "", "Acidosis filler filler filler filler filler filler filler filler filler yes."),
]


def checker_of(folder: Path, docs: list[tuple[str, str, str]] = DOCS, **kwargs: object) -> NLIChecker:
    return NLIChecker(Corpus.from_documents(docs), NLIModel(read_folder(folder)), **kwargs)  # type: ignore[arg-type]


def ask(meta: dict[str, object] | None = None) -> Answer:
    return Answer(id="a", question="", response="", meta=meta or {})


def claim(text: str) -> Claim:
    return Claim(text=text, index=0)


class TestFolder:
    def test_three_label_nli_folder(self, tmp_path: Path) -> None:
        """entailment/neutral/contradiction in any order and case: the indices of supported and contradicted."""
        folder = read_folder(build_model(tmp_path, labels={"0": "CONTRADICTION", "1": "NEUTRAL", "2": "ENTAILMENT"}))
        assert (folder.labels, folder.supported, folder.contradiction) == (("CONTRADICTION", "NEUTRAL", "ENTAILMENT"), 2, 0)
        assert folder.max_length == 512  # no truncation in tokenizer.json, no max_position_embeddings

    def test_two_label_minicheck_folder(self, tmp_path: Path) -> None:
        folder = read_folder(build_model(tmp_path, labels=MINICHECK_LABELS, max_length=64))
        assert (folder.supported, folder.contradiction, folder.max_length) == (1, None, 64)

    def test_numbered_labels_need_supported_label(self, tmp_path: Path) -> None:
        labels = {"0": "LABEL_0", "1": "LABEL_1"}
        with pytest.raises(ConfigError, match=r"config.json: cannot tell which label .*\"supported_label\""):
            read_folder(build_model(tmp_path / "a", labels=labels))
        folder = read_folder(build_model(tmp_path / "b", labels=labels, extra={"supported_label": "LABEL_1"}))
        assert (folder.supported, folder.contradiction) == (1, None)
        with pytest.raises(ConfigError, match="supported_label 'LABEL_2' must name one label"):
            read_folder(build_model(tmp_path / "c", labels=labels, extra={"supported_label": "LABEL_2"}))

    def test_window_from_config(self, tmp_path: Path) -> None:
        """config.json's max_position_embeddings, at most 512 (RoBERTa's 514 counts its padding offset)."""
        assert read_folder(build_model(tmp_path / "a", extra={"max_position_embeddings": 128})).max_length == 128
        assert read_folder(build_model(tmp_path / "b", extra={"max_position_embeddings": 514})).max_length == 512

    def test_missing_files_and_bad_json_are_named(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigError, match="model folder not found"):
            read_folder(tmp_path / "none")
        build_model(tmp_path / "m")
        (tmp_path / "m" / "tokenizer.json").unlink()
        with pytest.raises(ConfigError, match=r"m: missing tokenizer.json"):
            read_folder(tmp_path / "m")
        build_model(tmp_path / "m")
        (tmp_path / "m" / "config.json").write_text("{")
        with pytest.raises(ConfigError, match=r"config.json: cannot read"):
            read_folder(tmp_path / "m")

    def test_output_shape_must_match_the_labels(self, tmp_path: Path) -> None:
        folder = build_model(tmp_path)
        (folder / "config.json").write_text(json.dumps({"id2label": MINICHECK_LABELS}))
        with pytest.raises(ConfigError, match=r"output of shape \(1, 3\) for one pair; config.json names 2 labels"):
            NLIModel(read_folder(folder))

    def test_missing_extra_names_the_install(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        folder = read_folder(build_model(tmp_path))
        monkeypatch.setitem(sys.modules, "onnxruntime", None)
        with pytest.raises(ConfigError, match=r"pip install 'dahl\[nli\]'"):
            NLIModel(folder)

    def test_transformers_folder_without_torch_names_the_extra(self, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
        """config.json and weights but no model.onnx: a transformers folder, read without torch;
        loading it without the extra names the folder and the install."""
        build_model(tmp_path)
        (tmp_path / "model.onnx").rename(tmp_path / "model.safetensors")
        folder = read_folder(tmp_path)
        assert (folder.backend, folder.files) == ("transformers", ("model.safetensors", "tokenizer.json", "config.json"))
        assert folder.fingerprint != read_folder(build_model(tmp_path / "onnx")).fingerprint
        monkeypatch.setitem(sys.modules, "torch", None)
        with pytest.raises(ConfigError, match=rf"{tmp_path} is a transformers model folder \(no model.onnx\): .*"
                                              r"pip install 'dahl\[transformers\]'"):
            NLIModel(folder)

    def test_kind_of_folder(self, tmp_path: Path) -> None:
        """model.onnx wins over weights beside it; a transformers folder needs its config and tokenizer."""
        build_model(tmp_path / "both")
        (tmp_path / "both" / "pytorch_model.bin").write_bytes(b"weights")
        assert read_folder(tmp_path / "both").backend == "onnx"
        (tmp_path / "t").mkdir()
        (tmp_path / "t" / "model.safetensors").write_bytes(b"weights")
        with pytest.raises(ConfigError, match=r"t: missing config.json, tokenizer.json \(or tokenizer_config.json\) "
                                              r"\(a transformers model folder"):
            read_folder(tmp_path / "t")
        (tmp_path / "e").mkdir()
        with pytest.raises(ConfigError, match=r"e: missing model.onnx, tokenizer.json, config.json .*or is a "
                                              r"transformers folder: config.json, model.safetensors or pytorch_model.bin"):
            read_folder(tmp_path / "e")

    def test_sharded_weights_are_hashed(self, tmp_path: Path) -> None:
        """A sharded index's shards are part of the fingerprint."""
        build_model(tmp_path)
        (tmp_path / "model.onnx").unlink()
        (tmp_path / "model.safetensors.index.json").write_text(json.dumps(
            {"weight_map": {"a.weight": "model-00001-of-00002.safetensors", "b.weight": "model-00002-of-00002.safetensors"}}))
        for shard in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
            (tmp_path / shard).write_bytes(b"1")
        before = read_folder(tmp_path)
        assert before.files[:3] == ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                                    "model.safetensors.index.json")
        (tmp_path / "model-00002-of-00002.safetensors").write_bytes(b"2")
        assert read_folder(tmp_path).fingerprint != before.fingerprint

    def test_import_dahl_needs_no_extra(self) -> None:
        code = ("import sys, dahl, dahl.adapters._nli; "
                "assert not {'onnxruntime', 'tokenizers', 'torch', 'transformers'} & set(sys.modules)")
        subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)

    def test_fingerprint_and_cache_key_follow_the_weights(self, tmp_path: Path) -> None:
        """Same files, same fingerprint; other weights, tokenizer or config: another fingerprint and cache key."""
        a = checker_of(build_model(tmp_path / "a"))
        same = checker_of(build_model(tmp_path / "same"))
        weights = checker_of(build_model(tmp_path / "w", yes=3.0))
        window = checker_of(build_model(tmp_path / "t", max_length=100))
        config = checker_of(build_model(tmp_path / "c", extra={"note": 1}))
        assert a.model.folder.fingerprint == same.model.folder.fingerprint
        assert len({c.model.folder.fingerprint for c in (a, weights, window, config)}) == 4
        keys = {check_key(c, claim("the sky"), ask()) for c in (a, same, weights, window, config)}
        assert len(keys) == 4
        assert a.fingerprint.startswith(f"nli/v1:{a.model.folder.fingerprint}:{a.corpus.fingerprint}:")


class TestVerdicts:
    async def test_three_label_outcomes(self, tmp_path: Path) -> None:
        checker = checker_of(build_model(tmp_path))
        sky = await checker.check(claim("the sky"), ask())
        assert (sky.label, sky.reason, sky.evidence[0].source) == (Label.SUPPORTED, None, "sky")
        assert sky.evidence[0].score == pytest.approx(0.9362, abs=1e-4)  # softmax(4, 1, 0)[0]
        assert sky.raw == "entailed: P(entailment)=0.94 in passage sky#0-20"
        grass = await checker.check(claim("the grass"), ask())
        assert (grass.label, grass.reason) == (Label.UNSUPPORTED, UnsupportedReason.CONTRADICTED)
        assert grass.raw is not None and grass.raw.startswith("contradicted: P(contradiction)=0.94 in passage grass")
        lactic = await checker.check(claim("lactic"), ask())
        assert (lactic.label, lactic.reason) == (Label.UNSUPPORTED, UnsupportedReason.NO_EVIDENCE)
        assert lactic.evidence[0].score == pytest.approx(0.2119, abs=1e-4)  # softmax(0, 1, 0)[0]

    async def test_thresholds_are_settings(self, tmp_path: Path) -> None:
        folder = build_model(tmp_path)
        lenient = checker_of(folder, threshold=0.2)
        assert (await lenient.check(claim("lactic"), ask())).label == Label.SUPPORTED
        strict = checker_of(folder, contradiction=0.95)
        assert (await strict.check(claim("the grass"), ask())).reason == UnsupportedReason.NO_EVIDENCE
        assert lenient.fingerprint != strict.fingerprint
        with pytest.raises(ConfigError, match="thresholds in"):
            checker_of(folder, threshold=1.5)

    async def test_two_label_has_no_contradiction(self, tmp_path: Path) -> None:
        checker = checker_of(build_model(tmp_path, labels=MINICHECK_LABELS, token_types=True))
        assert checker.model.inputs == ("input_ids", "attention_mask", "token_type_ids")
        assert (await checker.check(claim("the sky"), ask())).label == Label.SUPPORTED
        grass = await checker.check(claim("the grass"), ask())
        assert (grass.label, grass.reason) == (Label.UNSUPPORTED, UnsupportedReason.NO_EVIDENCE)
        assert grass.raw is not None and grass.raw.startswith("not entailed: best P(supported)=0.01")  # softmax(5, 0)

    async def test_unknown_when_nothing_is_retrieved(self, tmp_path: Path) -> None:
        checker = checker_of(build_model(tmp_path))
        none = await checker.check(claim("metformin"), ask())
        assert (none.label, none.raw, none.evidence) == (Label.UNKNOWN, "no passage found", ())
        elsewhere = await checker.check(claim("sky grass"), ask({"evidence_ids": ["grass"]}))
        assert [e.source for e in elsewhere.evidence] == ["grass"]  # evidence_ids restrict the search
        assert (await checker.check(claim("the sky"), ask({"evidence_ids": ["nowhere"]}))).label == Label.UNKNOWN

    async def test_long_passage_is_chunked_and_the_best_chunk_decides(self, tmp_path: Path) -> None:
        """A window of 8 tokens: the pair truncated whole misses "yes"; the chunk holding it entails."""
        checker = checker_of(build_model(tmp_path, max_length=8))
        text = DOCS[3][2]
        chunks = checker.model.chunks(text, "acidosis")
        assert chunks == ["Acidosis filler filler filler", "filler filler filler filler", "filler filler yes."]
        whole = checker.model.probabilities([(text, "acidosis")])
        assert whole[0, 0] == pytest.approx(0.2119, abs=1e-4)
        verdict = await checker.check(claim("acidosis"), ask())
        assert verdict.label == Label.SUPPORTED and verdict.evidence[0].score == pytest.approx(0.9362, abs=1e-4)

    async def test_maximum_over_passages(self, tmp_path: Path) -> None:
        docs = [("neutral", "", "Sky filler filler."), ("yes", "", "Sky yes."), ("no", "", "Sky no filler filler.")]
        checker = checker_of(build_model(tmp_path), docs)
        verdict = await checker.check(claim("sky"), ask())
        assert verdict.label == Label.SUPPORTED
        assert [e.source for e in verdict.evidence] == ["yes", "neutral", "no"]  # by P(entailment)

    async def test_batched_equals_one_at_a_time(self, tmp_path: Path) -> None:
        """Claims checked at once share inference calls and get exactly the verdicts of one-by-one checks."""
        checker = checker_of(build_model(tmp_path, max_length=8), threads=1)
        texts = ["the sky", "the grass", "lactic", "acidosis", "metformin", "sky blue", "green grass"] * 3
        calls: list[int] = []
        inner = checker.model.probabilities

        def counted(pairs: list[tuple[str, str]]) -> np.ndarray:
            calls.append(len(pairs))
            return inner(pairs)

        checker.model.probabilities = counted  # type: ignore[method-assign]
        batched = await asyncio.gather(*(checker.check(claim(t), ask()) for t in texts))
        assert len(calls) < len(texts) and max(calls) > 4 and max(calls) <= 32
        calls.clear()
        assert batched == [checker.check_sync(claim(t), ask()) for t in texts]
        pairs = [p for t in texts for p in checker._pairs_of(claim(t), ask())[1]]
        np.testing.assert_allclose(inner(pairs), np.concatenate([inner([p]) for p in pairs]), rtol=0, atol=1e-7)

    async def test_inference_failure_is_an_adapter_error_for_each_claim(self, tmp_path: Path) -> None:
        checker = checker_of(build_model(tmp_path), threads=1)

        def broken(pairs: list[tuple[str, str]]) -> np.ndarray:
            raise AdapterError("model.onnx: inference failed: boom")

        checker.model.probabilities = broken  # type: ignore[method-assign]
        results = await asyncio.gather(*(checker.check(claim(t), ask()) for t in ("the sky", "the grass")),
                                       return_exceptions=True)
        assert [str(r) for r in results] == ["model.onnx: inference failed: boom"] * 2
        assert not checker._queue


class TestSettings:
    def test_nli_needs_a_model_and_evidence(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigError, match="--checker nli needs --nli-model DIR"):
            AdapterSettings(checker="nli", evidence=REPO / "examples" / "corpus.jsonl")
        with pytest.raises(ConfigError, match="--checker nli needs --evidence"):
            AdapterSettings(checker="nli", nli_model=tmp_path)
        with pytest.raises(ConfigError, match="must be in"):
            AdapterSettings(checker="nli", nli_model=tmp_path, evidence=REPO / "examples" / "corpus.jsonl",
                            nli_threshold=2.0)

    def test_eval_config_check_table(self, tmp_path: Path) -> None:
        build_model(tmp_path / "m")
        (tmp_path / "c.jsonl").write_text(json.dumps({"id": "d", "text": "x"}) + "\n")
        (tmp_path / "q.csv").write_text("id,question\nq1,Why?\n")
        (tmp_path / "eval.toml").write_text('[questions]\nfile = "q.csv"\n[[models]]\nname = "m"\nbase_url = "http://127.0.0.1:1/v1"\n'
                                            '[check]\nkind = "nli"\nevidence = "c.jsonl"\nnli_model = "m"\n'
                                            'nli_threshold = 0.7\n')
        adapters = load_eval_config(tmp_path / "eval.toml").adapters
        assert (adapters.checker, adapters.nli_model, adapters.nli_threshold) == ("nli", tmp_path / "m", 0.7)
        (tmp_path / "eval.toml").write_text('[questions]\nfile = "q.csv"\n[[models]]\nname = "m"\nbase_url = "http://127.0.0.1:1/v1"\n'
                                            '[check]\nkind = "nli"\nevidence = "c.jsonl"\n')
        with pytest.raises(ConfigError, match=r"\[check\].*needs nli_model"):
            load_eval_config(tmp_path / "eval.toml")


    def test_score_config_check_table(self, tmp_path: Path) -> None:
        """``[check]`` of ``dahl score --config``: nli keys alone make no endpoint; a wrong type is named."""
        (tmp_path / "a.toml").write_text('[check]\nnli_model = "m"\nnli_contradiction = 0.8\n')
        assert load_nli(tmp_path / "a.toml") == {"nli_model": tmp_path / "m", "nli_contradiction": 0.8}
        assert load_config(tmp_path / "a.toml") == {}
        (tmp_path / "b.toml").write_text('[check]\nnli_threshold = "high"\n')
        with pytest.raises(ConfigError, match=r"b.toml: \[check\] nli_threshold must be int or float, got 'high'"):
            load_nli(tmp_path / "b.toml")


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def score_quickstart(folder: Path, tmp_path: Path) -> None:
    """Score the README example with ``--checker nli --nli-model folder`` (a tiny model whose only
    entailing word is "metformin"), check each verdict, then again from a ``--config`` file: all cached."""
    examples = REPO / "examples"
    args = [str(examples / "answers.jsonl"), "--evidence", str(examples / "corpus.jsonl"), "--checker", "nli",
            "--nli-model", str(folder), "--cache-dir", str(tmp_path / "cache"), "--no-progress"]
    status, _ = run("score", *args, "-o", str(tmp_path / "out"))
    assert status == 0
    lines = [json.loads(line) for line in (tmp_path / "out" / "answers.jsonl").read_text().splitlines()]
    claims = [c for line in lines for c in line["claims"]]
    assert len(claims) == 42
    for c in claims:  # "metformin" in the claim or its best passage is the tiny model's entailment
        stated = "metformin" in (c["text"] + c["evidence"][0]["text"]).lower()
        assert (c["label"], c.get("reason")) == (("supported", None) if stated else ("unsupported", "no_evidence"))
    assert {c["label"] for c in claims} == {"supported", "unsupported"}
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["config"]["checker"].startswith(f"nli/v1:{read_folder(folder).fingerprint}:")
    (tmp_path / "score.toml").write_text(f'[check]\nnli_model = "{folder.relative_to(tmp_path)}"\n')
    status, _ = run("score", *args[:5], "--config", str(tmp_path / "score.toml"), *args[7:],
                    "-o", str(tmp_path / "again"))
    assert status == 0
    again = json.loads((tmp_path / "again" / "summary.json").read_text())
    assert (again["run"]["claims_cached"], again["run"]["claims_checked"]) == (42, 0)
    assert (tmp_path / "again" / "answers.jsonl").read_text() == (tmp_path / "out" / "answers.jsonl").read_text()


class TestCommands:
    def test_score_the_quickstart_example_offline(self, tmp_path: Path) -> None:
        """``dahl score --checker nli`` on the README example: the model's verdicts, then all from the cache."""
        score_quickstart(build_model(tmp_path / "m", entail_words=("metformin",)), tmp_path)

    def test_models_check(self, tmp_path: Path) -> None:
        build_model(tmp_path / "m")
        status, output = run("models", "check", str(tmp_path / "m"))
        assert status == 0
        assert "labels: 0 entailment (supported), 1 neutral, 2 contradiction (contradicted)" in output
        assert f"fingerprint: {read_folder(tmp_path / 'm').fingerprint}" in output
        assert "backend: onnx (model.onnx, run by onnxruntime; extra nli)" in output and "runtime: onnxruntime 1." in output
        assert "usable: yes" in output
        build_model(tmp_path / "n", labels={"0": "LABEL_0", "1": "LABEL_1"})
        result = CliRunner().invoke(main, ["models", "check", str(tmp_path / "n")])
        assert result.exit_code == 2 and "usable: no" in result.output

    def test_models_check_a_transformers_folder_without_the_extra(self, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
        build_model(tmp_path)
        (tmp_path / "model.onnx").rename(tmp_path / "model.safetensors")
        monkeypatch.setitem(sys.modules, "torch", None)
        result = CliRunner().invoke(main, ["models", "check", str(tmp_path)])
        assert result.exit_code == 2
        assert "backend: transformers (no model.onnx, run by torch; extra transformers)" in result.output
        assert "usable: no" in result.output and "pip install 'dahl[transformers]'" in result.output
