"""Tiny real model folders for the nli Checker: an ONNX graph by onnx.helper and a WordLevel tokenizer.

The graph: embedding lookup (3 features per token: entail, neutral, contradict), masked, the
maximum over tokens, then a MatMul and bias to the labels' logits. "yes" anywhere in the pair
gives entailment logit ``yes`` (default 4), "no" contradiction logit 4, and neutral is 1, so a
pair holding neither has P(entailment) = e^0 / (e^0 + e^1 + e^0) = 0.212 (three labels).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

WORDS = ("yes", "no", "filler", "metformin", "lactic", "acidosis", "the", "sky", "is", "blue", "grass", "green")
SPECIAL = ("[PAD]", "[CLS]", "[SEP]", "[UNK]")
#: Labels of a three-label NLI folder and a two-label MiniCheck folder.
NLI_LABELS = {"0": "entailment", "1": "neutral", "2": "contradiction"}
MINICHECK_LABELS = {"0": "unsupported", "1": "supported"}


def build_model(folder: Path, *, labels: dict[str, str] | None = None, yes: float = 4.0,
                max_length: int | None = None, token_types: bool = False, extra: dict[str, object] | None = None,
                entail_words: tuple[str, ...] = ("yes",)) -> Path:
    """Write model.onnx, tokenizer.json and config.json into ``folder`` and return it.

    ``labels`` is config.json's id2label (default three-label NLI): entailment, supported and
    LABEL_1 take the entail feature, contradiction the contradict one, neutral a bias of 1, any
    other label (unsupported, LABEL_0) the bias plus the contradict feature. ``max_length``
    sets tokenizer.json's truncation length; ``token_types`` adds an (unused) token_type_ids input.
    """
    labels = labels or NLI_LABELS
    folder.mkdir(parents=True, exist_ok=True)
    vocab = {w: i for i, w in enumerate((*SPECIAL, *WORDS))}
    table = np.zeros((len(vocab), 3), dtype=np.float32)
    for word in entail_words:
        table[vocab[word], 0] = yes
    table[vocab["no"], 2] = 4.0
    names = [labels[str(i)] for i in range(len(labels))]
    weights = np.zeros((3, len(names)), dtype=np.float32)
    bias = np.zeros(len(names), dtype=np.float32)
    for j, name in enumerate(n.lower() for n in names):
        if name in ("entailment", "supported", "label_1"):
            weights[0, j] = 1.0
        elif name == "contradiction":
            weights[2, j] = 1.0
        elif name == "neutral":
            bias[j] = 1.0
        else:  # unsupported, LABEL_0: neutral and contradiction in one
            weights[2, j], bias[j] = 1.0, 1.0
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "tokens"])
              for n in ("input_ids", "attention_mask", *(("token_type_ids",) if token_types else ()))]
    nodes = [
        helper.make_node("Gather", ["table", "input_ids"], ["emb"]),
        helper.make_node("Cast", ["attention_mask"], ["maskf"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["maskf", "axis2"], ["mask3"]),
        helper.make_node("Mul", ["emb", "mask3"], ["masked"]),
        helper.make_node("ReduceMax", ["masked"], ["pooled"], axes=[1], keepdims=0),
        helper.make_node("MatMul", ["pooled", "weights"], ["mixed"]),
        helper.make_node("Add", ["mixed", "bias"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes, "tiny-nli", inputs, [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", len(names)])],
        initializer=[numpy_helper.from_array(table, "table"), numpy_helper.from_array(weights, "weights"),
                     numpy_helper.from_array(bias, "bias"), numpy_helper.from_array(np.array([2], np.int64), "axis2")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(folder / "model.onnx"))
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 1), ("[SEP]", 2)])
    if max_length is not None:
        tokenizer.enable_truncation(max_length)
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "config.json").write_text(json.dumps({"id2label": labels, **(extra or {})}))
    return folder
