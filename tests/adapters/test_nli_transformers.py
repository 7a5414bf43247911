"""Tests for dahl.adapters._nli's transformers path: tiny BertForSequenceClassification folders
built by the test (no download), run by torch. Skipped where torch or transformers is absent (CI)."""

from __future__ import annotations

import asyncio
import re
import shutil
import socket
import warnings
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch", reason="the transformers path needs torch (the transformers extra)")
transformers = pytest.importorskip("transformers", reason="the transformers path needs transformers (its extra)")

from dahl.adapters._corpus import Corpus
from dahl.adapters._nli import NLIChecker, NLIModel, read_folder
from dahl.cache._keys import check_key
from dahl.cli import main
from dahl.errors import ConfigError
from dahl.records import Label, UnsupportedReason
from tests.adapters.nli_models import MINICHECK_LABELS, build_model
from tests.adapters.nli_torch_models import build_bert
from tests.adapters.test_nli import DOCS, ask, checker_of, claim, score_quickstart

PAIRS = [("The sky is blue yes.", "the sky"), ("The grass is green no.", "the grass"), ("Lactic filler.", "lactic"),
         ("filler yes", "no"), ("", "metformin")]


class TestFolder:
    def test_three_label_folder(self, tmp_path: Path) -> None:
        """save_pretrained's files, hashed; labels in any order; the window from max_position_embeddings."""
        folder = read_folder(build_bert(tmp_path, labels={"0": "CONTRADICTION", "1": "NEUTRAL", "2": "ENTAILMENT"}))
        assert folder.backend == "transformers"
        assert folder.files == ("model.safetensors", "tokenizer.json", "tokenizer_config.json", "config.json")
        assert (folder.labels, folder.supported, folder.contradiction) == (("CONTRADICTION", "NEUTRAL", "ENTAILMENT"), 2, 0)
        assert folder.max_length == 512
        assert read_folder(build_bert(tmp_path / "w", window=64)).max_length == 64

    def test_two_label_folder_and_pytorch_bin(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """The older weights file; loaded with every socket refused (local_files_only: never a download)."""
        folder = read_folder(build_bert(tmp_path, labels=MINICHECK_LABELS, safetensors=False))
        assert (folder.files[0], folder.supported, folder.contradiction) == ("pytorch_model.bin", 1, None)

        def refuse(*args: object) -> None:
            raise OSError("no network in this test")

        monkeypatch.setattr(socket.socket, "connect", refuse)
        monkeypatch.setattr(socket, "create_connection", refuse)
        model = NLIModel(folder)
        assert (model.inputs, model.calls) == (("input_ids", "attention_mask"), 1)
        assert model.runtime == f"torch {torch.__version__}, transformers {transformers.__version__}"

    def test_fingerprint_and_cache_key_follow_the_weights(self, tmp_path: Path) -> None:
        """The same build, the same fingerprint; other weights, window or config: another fingerprint and key."""
        a = checker_of(build_bert(tmp_path / "a"))
        same = checker_of(build_bert(tmp_path / "same"))
        weights = checker_of(build_bert(tmp_path / "w", yes=3.0))
        window = checker_of(build_bert(tmp_path / "t", window=100))
        config = checker_of(build_bert(tmp_path / "c", extra={"note": 1}))
        assert a.model.folder.fingerprint == same.model.folder.fingerprint
        assert len({c.model.folder.fingerprint for c in (a, weights, window, config)}) == 4
        assert len({check_key(c, claim("the sky"), ask()) for c in (a, same, weights, window, config)}) == 4

    def test_tokenizer_files_are_hashed(self, tmp_path: Path) -> None:
        build_bert(tmp_path)
        before = read_folder(tmp_path).fingerprint
        (tmp_path / "tokenizer_config.json").write_text((tmp_path / "tokenizer_config.json").read_text() + " ")
        assert read_folder(tmp_path).fingerprint != before

    def test_broken_weights_are_a_config_error(self, tmp_path: Path) -> None:
        build_bert(tmp_path)
        (tmp_path / "model.safetensors").write_bytes(b"not weights")
        with pytest.raises(ConfigError, match=rf"{tmp_path}: cannot load the transformers model: "):
            NLIModel(read_folder(tmp_path))


class TestVerdicts:
    async def test_three_label_outcomes(self, tmp_path: Path) -> None:
        """The ONNX tests' figures: softmax(4, 1, 0) entailed, contradicted, softmax(0, 1, 0) neither."""
        checker = checker_of(build_bert(tmp_path))
        assert checker.threads == 1 and checker.concurrency == 16  # torch spreads one call over its threads
        sky = await checker.check(claim("the sky"), ask())
        assert (sky.label, sky.reason, sky.evidence[0].source) == (Label.SUPPORTED, None, "sky")
        assert sky.evidence[0].score == pytest.approx(0.9362, abs=1e-4)
        assert sky.raw == "entailed: P(entailment)=0.94 in passage sky#0-20"
        grass = await checker.check(claim("the grass"), ask())
        assert (grass.label, grass.reason) == (Label.UNSUPPORTED, UnsupportedReason.CONTRADICTED)
        assert grass.raw is not None and grass.raw.startswith("contradicted: P(contradiction)=0.94 in passage grass")
        lactic = await checker.check(claim("lactic"), ask())
        assert (lactic.label, lactic.reason) == (Label.UNSUPPORTED, UnsupportedReason.NO_EVIDENCE)
        assert lactic.evidence[0].score == pytest.approx(0.2119, abs=1e-4)
        assert (await checker.check(claim("metformin"), ask())).label == Label.UNKNOWN

    async def test_two_label_has_no_contradiction(self, tmp_path: Path) -> None:
        checker = checker_of(build_bert(tmp_path, labels=MINICHECK_LABELS))
        assert (await checker.check(claim("the sky"), ask())).label == Label.SUPPORTED
        grass = await checker.check(claim("the grass"), ask())
        assert (grass.label, grass.reason) == (Label.UNSUPPORTED, UnsupportedReason.NO_EVIDENCE)
        assert grass.raw is not None and grass.raw.startswith("not entailed: best P(supported)=0.01")  # softmax(5, 0)

    async def test_long_passage_is_chunked_and_the_best_chunk_decides(self, tmp_path: Path) -> None:
        """A window of 8 positions: the pair truncated whole misses "yes"; the chunk holding it entails."""
        checker = checker_of(build_bert(tmp_path, window=8))
        text = DOCS[3][2]
        assert checker.model.chunks(text, "acidosis") == ["Acidosis filler filler filler", "filler filler filler filler",
                                                          "filler filler yes."]
        assert checker.model.probabilities([(text, "acidosis")])[0, 0] == pytest.approx(0.2119, abs=1e-4)
        verdict = await checker.check(claim("acidosis"), ask())
        assert verdict.label == Label.SUPPORTED and verdict.evidence[0].score == pytest.approx(0.9362, abs=1e-4)

    async def test_batched_equals_one_at_a_time(self, tmp_path: Path) -> None:
        """Claims checked at once share calls of up to 32 pairs, padded, and get the one-by-one verdicts."""
        checker = checker_of(build_bert(tmp_path, window=8))
        texts = ["the sky", "the grass", "lactic", "acidosis", "metformin", "sky blue", "green grass"] * 3
        calls: list[int] = []
        inner = checker.model.probabilities

        def counted(pairs: list[tuple[str, str]]) -> np.ndarray:
            calls.append(len(pairs))
            return inner(pairs)

        checker.model.probabilities = counted  # type: ignore[method-assign]
        batched = await asyncio.gather(*(checker.check(claim(t), ask()) for t in texts))
        assert len(calls) < len(texts) and max(calls) > 4 and max(calls) <= 32
        assert batched == [checker.check_sync(claim(t), ask()) for t in texts]
        pairs = [p for t in texts for p in checker._pairs_of(claim(t), ask())[1]]
        np.testing.assert_allclose(inner(pairs), np.concatenate([inner([p]) for p in pairs]), rtol=0, atol=1e-6)

    def test_probabilities_are_transformers_own(self, tmp_path: Path) -> None:
        """dahl's encoding and call give what AutoTokenizer + the model give on the same pairs."""
        folder = build_bert(tmp_path)
        model = NLIModel(read_folder(folder))
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
        bert = transformers.AutoModelForSequenceClassification.from_pretrained(folder, local_files_only=True).eval()
        batch = tokenizer([p for p, _ in PAIRS], [h for _, h in PAIRS], padding=True, truncation=True,
                          return_tensors="pt")
        with torch.no_grad():
            expected = bert(**batch).logits.softmax(-1).numpy()
        np.testing.assert_allclose(model.probabilities(PAIRS), expected, rtol=0, atol=1e-6)

    def test_agrees_with_the_onnx_graph_and_its_own_export(self, tmp_path: Path) -> None:
        """The BERT, the hand-written ONNX graph it mimics and the BERT exported to ONNX score alike."""
        bert = NLIModel(read_folder(build_bert(tmp_path / "bert")))
        graph = NLIModel(read_folder(build_model(tmp_path / "graph")))
        np.testing.assert_allclose(bert.probabilities(PAIRS), graph.probabilities(PAIRS), rtol=0, atol=1e-3)
        exported = tmp_path / "exported"
        exported.mkdir()
        for name in ("tokenizer.json", "config.json"):
            shutil.copy(tmp_path / "bert" / name, exported / name)
        module = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "bert",
                                                                                 local_files_only=True).eval()
        ids = torch.tensor([[1, 10, 11, 2, 10, 2]])
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the TorchScript exporter is deprecated; the new one needs onnxscript
                torch.onnx.export(module, (ids, torch.ones_like(ids)), str(exported / "model.onnx"), dynamo=False,
                                  input_names=["input_ids", "attention_mask"], output_names=["logits"],
                                  dynamic_axes={"input_ids": {0: "pairs", 1: "tokens"},
                                                "attention_mask": {0: "pairs", 1: "tokens"}, "logits": {0: "pairs"}})
        except Exception as exc:  # noqa: BLE001 - whatever this torch's exporter lacks
            pytest.skip(f"torch.onnx.export failed: {exc}")
        onnx = NLIModel(read_folder(exported))
        assert (onnx.folder.backend, onnx.inputs) == ("onnx", ("input_ids", "attention_mask"))
        np.testing.assert_allclose(onnx.probabilities(PAIRS), bert.probabilities(PAIRS), rtol=0, atol=1e-5)
        corpus = Corpus.from_documents(DOCS)
        verdicts = [[NLIChecker(corpus, m).check_sync(claim(t), ask()) for t in ("the sky", "the grass", "lactic")]
                    for m in (bert, onnx)]
        assert [(v.label, v.reason) for v in verdicts[0]] == [(v.label, v.reason) for v in verdicts[1]]
        assert [v.label for v in verdicts[0]] == [Label.SUPPORTED, Label.UNSUPPORTED, Label.UNSUPPORTED]


class TestCommands:
    def test_score_the_quickstart_example_offline(self, tmp_path: Path) -> None:
        """``dahl score --checker nli --nli-model DIR`` over a transformers folder: the ONNX test's verdicts."""
        score_quickstart(build_bert(tmp_path / "m", entail_words=("metformin",)), tmp_path)

    def test_models_check(self, tmp_path: Path) -> None:
        build_bert(tmp_path / "m")
        result = CliRunner().invoke(main, ["models", "check", str(tmp_path / "m")], catch_exceptions=False)
        assert result.exit_code == 0
        assert re.search(r"files: model.safetensors \([\d,]+ bytes\), tokenizer.json \(", result.output)
        assert "backend: transformers (no model.onnx, run by torch; extra transformers)" in result.output
        assert f"runtime: torch {torch.__version__}" in result.output
        assert "labels: 0 entailment (supported), 1 neutral, 2 contradiction (contradicted)" in result.output
        assert "usable: yes" in result.output
