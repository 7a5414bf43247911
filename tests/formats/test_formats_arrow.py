"""Parquet files and Hugging Face datasets folders, read in batches through pyarrow."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from dahl.errors import ConfigError, InputError
from dahl.formats import _arrow as arrow
from dahl.formats import read_answers

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def save_to_disk_folder(folder: Path, splits: dict[str, list[dict[str, object]]]) -> Path:
    """Write the layout datasets' save_to_disk writes: dataset_dict.json, then per split state.json + .arrow."""
    folder.mkdir()
    (folder / "dataset_dict.json").write_text(json.dumps({"splits": list(splits)}), encoding="utf-8")
    for split, rows in splits.items():
        (folder / split).mkdir()
        table = pa.Table.from_pylist(rows)
        with pa.OSFile(str(folder / split / "data-00000-of-00001.arrow"), "wb") as sink:
            with pa.ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table, max_chunksize=2)
        state = {"_data_files": [{"filename": "data-00000-of-00001.arrow"}], "_split": split}
        (folder / split / "state.json").write_text(json.dumps(state), encoding="utf-8")
    return folder


class TestParquet:
    def test_rows_in_batches(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Every row is read across batch boundaries, in order, with the mapping applied."""
        monkeypatch.setattr(arrow, "BATCH_ROWS", 2)
        path = tmp_path / "answers.parquet"
        pq.write_table(pa.table({"prompt": [f"q{i}" for i in range(5)], "response": [f"r{i}" for i in range(5)]}),
                       path, row_group_size=3)
        answers = list(read_answers(path, fields={"question": "prompt"}))
        assert [a.question for a in answers] == ["q0", "q1", "q2", "q3", "q4"]

    def test_bad_row_names_row_number(self, tmp_path: Path) -> None:
        """A row with an empty response is skipped, named by its 1-based row number; a null model defaults."""
        path = tmp_path / "a.parquet"
        pq.write_table(pa.table({"question": ["q1", "q2"], "response": ["", "r2"], "model": ["m", None]}), path)
        errors: list[InputError] = []
        answers = list(read_answers(path, on_error=errors.append))
        assert [(a.question, a.model) for a in answers] == [("q2", "unknown")]
        assert [(e.file, e.line, e.field) for e in errors] == [(str(path), 1, "response")]

    def test_two_response_columns(self, tmp_path: Path) -> None:
        """Two response columns give two answers per row, named after the columns."""
        path = tmp_path / "a.parquet"
        pq.write_table(pa.table({"question": ["q"], "gpt": ["A."], "llama": ["B."]}), path)
        answers = list(read_answers(path, response_column=["gpt", "llama"]))
        assert [(a.model, a.response) for a in answers] == [("gpt", "A."), ("llama", "B.")]

    def test_not_parquet(self, tmp_path: Path) -> None:
        """A file given as parquet that is not one is a ConfigError naming it."""
        path = tmp_path / "a.parquet"
        path.write_text("question,response\n", encoding="utf-8")
        with pytest.raises(ConfigError, match=r"cannot read .*a\.parquet as Parquet"):
            read_answers(path, "parquet")

    def test_missing_pyarrow(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without pyarrow the error gives the pip command of the extra."""
        path = tmp_path / "a.parquet"
        pq.write_table(pa.table({"question": ["q"], "response": ["r"]}), path)
        monkeypatch.setitem(sys.modules, "pyarrow", None)
        with pytest.raises(ConfigError, match=r"needs pyarrow, which is not installed; pip install 'dahl\[arrow\]'"):
            read_answers(path)


class TestSavedDataset:
    def test_dataset_dict_folder(self, tmp_path: Path) -> None:
        """A save_to_disk folder is detected as hf and every split is read, in the listed order."""
        folder = save_to_disk_folder(tmp_path / "ds", {
            "train": [{"question": f"t{i}", "response": "r"} for i in range(3)],
            "test": [{"question": "x0", "response": "r"}],
        })
        assert [a.question for a in read_answers(folder)] == ["t0", "t1", "t2", "x0"]

    def test_missing_pyarrow_names_the_arrow_extra(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A saved folder needs pyarrow alone: without it --format hf names the arrow extra, not hf."""
        folder = save_to_disk_folder(tmp_path / "ds", {"train": [{"question": "q", "response": "r"}]})
        monkeypatch.setitem(sys.modules, "pyarrow", None)
        with pytest.raises(ConfigError, match=r"needs pyarrow, which is not installed; pip install 'dahl\[arrow\]'$"):
            list(read_answers(folder, "hf"))

    def test_not_a_saved_folder(self, tmp_path: Path) -> None:
        """A plain folder is a ConfigError saying what was expected: with --format hf a
        saved folder; detected, a directory whose files to pass, or a saved folder."""
        (tmp_path / "plain").mkdir()
        with pytest.raises(ConfigError, match="not a folder saved by datasets' save_to_disk"):
            read_answers(tmp_path / "plain", "hf")
        with pytest.raises(ConfigError, match=r"is a directory, not a file: .*/plain/\*\.jsonl; .*save_to_disk"):
            read_answers(tmp_path / "plain")

    def test_shared_medhallu(self) -> None:
        """MedHallu's save_to_disk copy gives 2,000 answers: ground truth and hallucinated, per question."""
        from tests.conftest import require_data

        folder = require_data("medhallu/MedHallu_pqa_labeled")
        answers = read_answers(folder, fields={"question": "Question"},
                               response_column=["Ground Truth", "Hallucinated Answer"])
        models = [a.model for a in answers]
        assert (len(models), models[:2]) == (2000, ["Ground Truth", "Hallucinated Answer"])


class TestHubName:
    @pytest.fixture
    def hf_cache(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
        """An empty datasets cache; datasets imported with offline mode off, as a user's session may have it."""
        # set here so that monkeypatch restores them after the reader forces them to "1"
        monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")
        monkeypatch.setenv("HF_HUB_OFFLINE", "0")
        datasets = pytest.importorskip("datasets")
        import huggingface_hub.constants

        cache = tmp_path / "datasets"
        monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
        for module in (datasets.config, huggingface_hub.constants):
            monkeypatch.setattr(module, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", False)
        return cache

    def test_uncached_name_never_downloads(self, hf_cache: Path) -> None:
        """A hub name absent from the local cache is a ConfigError; nothing is fetched."""
        with pytest.raises(ConfigError, match="not .* in the local datasets cache .*never downloads"):
            list(read_answers("nobody/no-such-dataset", "hf"))

    def test_cached_name_is_read(self, hf_cache: Path, tmp_path: Path) -> None:
        """A hub dataset in the local cache is read offline, every row in order."""
        import datasets

        source = tmp_path / "rows.parquet"
        pq.write_table(pa.table({"question": ["q1", "q2"], "response": ["r1", "r2"]}), source)
        datasets.load_dataset("parquet", data_files={"train": str(source)}, cache_dir=str(hf_cache))
        # Lay the prepared split out where datasets keeps a hub dataset's: owner___name/config/version/hash.
        [prepared] = [p.parent for p in (hf_cache / "parquet").rglob("dataset_info.json")]
        target = hf_cache / "someone___tiny" / "default" / "0.0.0" / "0"
        target.mkdir(parents=True)
        (target / "dataset_info.json").write_bytes((prepared / "dataset_info.json").read_bytes())
        (target / "tiny-train.arrow").write_bytes((prepared / "parquet-train.arrow").read_bytes())
        assert [(a.question, a.response) for a in read_answers("someone/tiny", "hf")] == [("q1", "r1"), ("q2", "r2")]
