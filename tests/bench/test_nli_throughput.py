"""bench.nli_throughput: the MiniLM stand-in folder loads as an nli model, and the figures count every pair."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from bench.nli_throughput import _pairs, stand_in, throughput
from dahl.adapters._nli import NLIModel, read_folder


def fake_encoder(path: Path) -> Path:
    """An encoder graph shaped like MiniLM's: three int64 inputs, ``last_hidden_state`` (batch, tokens, 384)."""
    table = np.random.default_rng(1).normal(size=(30522, 384)).astype(np.float32)
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "tokens"])
              for n in ("input_ids", "attention_mask", "token_type_ids")]
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "input_ids"], ["last_hidden_state"])], "encoder", inputs,
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "tokens", 384])],
        initializer=[numpy_helper.from_array(table, "table")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_stand_in_is_a_three_label_folder_and_every_pair_is_counted(tmp_path: Path) -> None:
    folder = stand_in(fake_encoder(tmp_path / "encoder.onnx"), tmp_path / "m", ["metformin", "lowers", "glucose"])
    model = NLIModel(read_folder(folder))
    assert model.folder.labels == ("entailment", "neutral", "contradiction")
    assert model.inputs == ("input_ids", "attention_mask", "token_type_ids")
    figures = throughput(folder)
    assert figures["pairs"] == len(_pairs()) and figures["pairs_per_cpu_s"] > 0
