"""Provider calls retried after transient errors (the mock's --batch-fault), and never a batch created twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from dahl.batch import _ops as ops
from dahl.lanes._retry import RetryPolicy
from dahl.errors import TransientAPIError
from tests.batch.batch_runs import batch_stats, dahl, endpoint, ledger_events, write_answers

#: Backoff of at most 10 ms: the tests wait for nothing.
FAST = RetryPolicy(max_attempts=3, base_s=0.001, cap_s=0.01)


def _prepared(tmp_path: Path, url: str, provider: str = "openai") -> tuple[Path, str]:
    source = str(write_answers(tmp_path / "answers.jsonl", 3, 10))
    folder = tmp_path / "batch"
    code, text = dahl("batch", "prepare", source, "-o", str(folder), "--provider", provider, "--checker", "openai",
                      *endpoint(url), "--cache-dir", str(tmp_path / "cache"))
    assert code == 0 and "30 check requests" in text, text
    return folder, source


class TestRetriedCalls:
    @pytest.mark.parametrize("provider", ["openai", "anthropic"])
    def test_transient_faults_on_every_call_are_retried_and_one_batch_is_recorded(
        self, provider: str, tmp_path: Path, mocks: Any
    ) -> None:
        """A 500 on upload, a reset after create, two 503 on retrieve, a reset on results: 1 batch recorded, 30 stored."""
        url = mocks.start("--batch-fault", "upload:500", "--batch-fault", "create:reset", "--batch-fault",
                          "retrieve:503:2", "--batch-fault", "results:reset")
        folder, source = _prepared(tmp_path, url, provider)
        submitted = anyio.run(lambda: ops.submit(folder, retry=FAST))
        assert len(submitted) == 1
        report = anyio.run(lambda: ops.collect(folder, retry=FAST))
        assert (report.totals.stored, report.running) == (30, [])
        stats = batch_stats(url)
        faults = {k: v for k, v in stats.items() if k.startswith("faults_")}
        if provider == "openai":
            # the upload's 500 stored nothing; the lost create reply is adopted from GET /batches
            assert faults == {"faults_upload": 1, "faults_create": 1, "faults_retrieve": 2, "faults_results": 1}
            assert (stats["files_uploaded"], stats["batches_created"]) == (1, 1)
        else:  # Anthropic uploads nothing; the lost create reply is adopted from GET /messages/batches
            assert faults == {"faults_create": 1, "faults_retrieve": 2, "faults_results": 1}
            assert stats["batches_created"] == 1
        assert len(ledger_events(folder, "submitted")) == 1
        code, text = dahl("score", source, "-o", str(tmp_path / "out"), "--no-progress", "--checker", "openai",
                          *endpoint(url), "--cache-dir", str(tmp_path / "cache"))
        assert code == 0, text
        assert mocks.stats(url)["requests"] == 0

    def test_retries_give_up_after_max_attempts_and_the_ledger_keeps_the_batch(
        self, tmp_path: Path, mocks: Any
    ) -> None:
        """Retrieve fails 5 times: collect tries 3 times and raises; a second collect (2 faults left) succeeds."""
        url = mocks.start("--batch-fault", "retrieve:503:5")
        folder, _ = _prepared(tmp_path, url)
        anyio.run(lambda: ops.submit(folder, retry=FAST))
        with pytest.raises(TransientAPIError, match="HTTP 503"):
            anyio.run(lambda: ops.collect(folder, retry=FAST))
        assert batch_stats(url)["faults_retrieve"] == 3
        assert ledger_events(folder, "collected") == []
        report = anyio.run(lambda: ops.collect(folder, retry=FAST))
        assert report.totals.stored == 30
        assert batch_stats(url)["faults_retrieve"] == 5
        assert batch_stats(url)["batches_created"] == 1

    def test_a_permanent_error_is_not_retried(self, tmp_path: Path, mocks: Any) -> None:
        """A 404 (no such batch) is raised at once (0 retries); the command exits 4."""
        import aiohttp

        from dahl.batch._ledger import Ledger
        from dahl.batch._providers import OpenAIBatches
        from dahl.errors import PermanentAPIError

        url = mocks.start()
        folder, _ = _prepared(tmp_path, url)

        async def retrieve() -> int:
            async with aiohttp.ClientSession() as session:
                client = OpenAIBatches(session, url, "", retry=FAST)
                with pytest.raises(PermanentAPIError, match="HTTP 404"):
                    await client.retrieve("batch_nope")
                return client.retries

        assert anyio.run(retrieve) == 0
        Ledger.read(folder).append({"event": "submitted", "shard": "wave-01/check-0001.jsonl",
                                    "batch_id": "batch_nope"})
        code, text = dahl("batch", "collect", str(folder))
        assert code == 4 and "HTTP 404" in text, text

    def test_the_command_retries_a_lost_create_reply_with_its_default_policy(
        self, tmp_path: Path, mocks: Any
    ) -> None:
        """dahl batch submit after a reset create: exit 0, 1 batch created and recorded."""
        url = mocks.start("--batch-fault", "create:reset")
        folder, _ = _prepared(tmp_path, url)
        code, text = dahl("batch", "submit", str(folder))
        assert code == 0 and "batches submitted: 1" in text, text
        assert batch_stats(url)["batches_created"] == 1
        assert batch_stats(url)["faults_create"] == 1


class TestFaultFlag:
    def test_fault_specs_parse_and_a_bad_one_is_refused(self) -> None:
        """create:reset is 1 call; retrieve:503:2 two; a 404 is no batch fault and is refused by name."""
        from bench.mock_batch_faults import parse_batch_fault
        from dahl.errors import ConfigError

        assert parse_batch_fault("create:reset") == ("create", "reset", 1)
        assert parse_batch_fault("retrieve:503:2") == ("retrieve", "503", 2)
        with pytest.raises(ConfigError, match="--batch-fault must be OP:KIND\\[:N\\].*got 'upload:404'"):
            parse_batch_fault("upload:404")


def _listed(url: str, route: str) -> list[dict[str, Any]]:
    """The ``data`` of the mock's list ``route`` (``/files?purpose=batch``, ``/batches``, ``/messages/batches``)."""
    import json
    from urllib.request import urlopen

    with urlopen(url + route) as reply:
        data: list[dict[str, Any]] = json.loads(reply.read())["data"]
    return data


def _drop_lines(folder: Path, kinds: tuple[str, ...]) -> None:
    """Remove the ledger's events of ``kinds``: a kill before they were written."""
    import json

    path = folder / "ledger.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(line for line in lines if json.loads(line)["event"] not in kinds))


class TestResumedSubmit:
    @pytest.mark.parametrize(("provider", "lost", "route"), [
        ("openai", ("submitted",), "/batches"), ("openai", ("uploaded", "submitted"), "/batches"),
        ("anthropic", ("submitted",), "/messages/batches")])
    def test_a_batch_whose_ledger_lines_were_lost_is_adopted_and_exists_once(
        self, provider: str, lost: tuple[str, ...], route: str, tmp_path: Path, mocks: Any
    ) -> None:
        """Submitted, then the ledger loses its upload/submit lines (a kill): submit again adopts; 1 batch, 1 file."""
        url = mocks.start()
        folder, _ = _prepared(tmp_path, url, provider)
        code, text = dahl("batch", "submit", str(folder))
        assert code == 0, text
        first = ledger_events(folder, "submitted")[0]["batch_id"]
        _drop_lines(folder, lost)
        code, text = dahl("batch", "submit", str(folder))
        assert code == 0 and f"submitted wave-01/check-0001.jsonl: {first}" in text, text
        assert [b["id"] for b in _listed(url, route)] == [first]
        assert batch_stats(url)["batches_created"] == 1
        if provider == "openai":
            assert len(_listed(url, "/files?purpose=batch")) == batch_stats(url)["files_uploaded"] == 1
        assert [e["batch_id"] for e in ledger_events(folder, "submitted")] == [first]

    def test_an_upload_whose_reply_was_lost_is_used_and_its_copies_deleted(self, tmp_path: Path, mocks: Any) -> None:
        """An upload reset (file stored, id never recorded) plus a second copy: submit uses one, deletes the other."""
        import aiohttp

        from dahl.batch._providers import OpenAIBatches, ShardTag

        url = mocks.start("--batch-fault", "upload:reset")
        folder, _ = _prepared(tmp_path, url)
        with pytest.raises(TransientAPIError):
            anyio.run(lambda: ops.submit(folder, retry=RetryPolicy(max_attempts=1)))
        assert ledger_events(folder, "uploaded") == []
        (event,) = ledger_events(folder, "submitting")
        shard = folder / "wave-01" / "check-0001.jsonl"

        async def upload_again() -> str | None:  # a second copy of the same name
            async with aiohttp.ClientSession() as session:
                return await OpenAIBatches(session, url, "").upload(shard, ShardTag(event["key"], event["at"], 30))

        anyio.run(upload_again)
        assert len(_listed(url, "/files?purpose=batch")) == 2
        code, text = dahl("batch", "submit", str(folder))
        assert code == 0, text
        (kept,) = _listed(url, "/files?purpose=batch")
        assert kept["filename"] == f"check-0001-{event['key']}.jsonl"
        assert ledger_events(folder, "uploaded")[0]["file_id"] == kept["id"]
        (batch,) = _listed(url, "/batches")
        assert (batch["input_file_id"], batch["metadata"]["dahl_shard"]) == (kept["id"], event["key"])
        stats = batch_stats(url)
        assert (stats["files_uploaded"], stats["files_deleted"], stats["batches_created"]) == (2, 1, 1)
