"""``dahl models check DIR``: what a local model folder is and whether ``--checker nli`` can use it."""

from __future__ import annotations

from pathlib import Path

import click

from dahl.cli._console import exit_stopped, out
from dahl.errors import ConfigError

__all__ = ["models"]


@click.group()
def models() -> None:
    """Look into local model folders."""


@models.command("check")
@click.argument("folder", type=click.Path(path_type=Path))
def models_check(folder: Path) -> None:
    """Print FOLDER's files, kind (onnx or transformers), labels, window and fingerprint, and load
    and run the model once.

    Exits 2 with the reason when ``--checker nli`` cannot use it.
    """
    from dahl.adapters._nli import KNOWN_FILES, MODEL_FILES, NLIModel, read_folder

    out.print(f"folder: {folder}")
    found = [f"{f} ({(folder / f).stat().st_size:,} bytes)" for f in KNOWN_FILES if (folder / f).is_file()]
    out.print(f"files: {', '.join(found) or 'none of ' + ', '.join(MODEL_FILES)}")
    try:
        info = read_folder(folder)
        out.print("backend: " + ("onnx (model.onnx, run by onnxruntime; extra nli)" if info.backend == "onnx"
                                 else "transformers (no model.onnx, run by torch; extra transformers)"))
        roles = {info.supported: "supported"} | ({} if info.contradiction is None else {info.contradiction: "contradicted"})
        out.print("labels: " + ", ".join(f"{i} {name}" + (f" ({roles[i]})" if i in roles else "")
                                         for i, name in enumerate(info.labels)))
        out.print(f"max length: {info.max_length} tokens per (passage chunk, claim) pair")
        out.print(f"fingerprint: {info.fingerprint}")
        model = NLIModel(info)
    except ConfigError as exc:
        out.print("usable: no")
        exit_stopped(exc, "")
    out.print(f"runtime: {model.runtime}")
    out.print(f"inputs: {', '.join(model.inputs)}")
    out.print(f"usable: yes (dahl score ... --checker nli --nli-model {folder} --evidence CORPUS)")
