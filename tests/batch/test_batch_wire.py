"""dahl batch end to end against the mock's batch routes (loopback; tests/conftest.py's mocks)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


from tests.batch.batch_runs import (
    batch_stats,
    dahl,
    endpoint,
    ledger_events,
    shard_ids,
    submit_and_collect,
    write_answers,
)
from tests.conftest import REPO


def _claims(out: Path) -> dict[str, Any]:
    """answers.jsonl of ``out`` as {answer id: its claims (text, label, raw, reason, ...)}."""
    rows = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
    return {row["id"]: row["claims"] for row in rows}


class TestWaves:
    def test_split_then_check_waves_give_the_online_verdicts_with_zero_requests(
        self, tmp_path: Path, mocks: Any
    ) -> None:
        """openai Splitter and Checker: wave 1 splits, wave 2 checks; score then calls nothing and matches online."""
        answers = str(write_answers(tmp_path / "answers.jsonl", 6, 4))
        online_url, batch_url = mocks.start(), mocks.start()
        adapters = ["--splitter", "openai", "--checker", "openai"]
        code, text = dahl("score", answers, "-o", str(tmp_path / "online"), "--no-progress", "--cache-dir",
                          str(tmp_path / "cache-online"), *adapters, *endpoint(online_url))
        assert code == 0, text
        folder, cache = tmp_path / "batch", ["--cache-dir", str(tmp_path / "cache-batch")]
        prepare = ("batch", "prepare", answers, "-o", str(folder), *adapters, *endpoint(batch_url), *cache)
        code, text = dahl(*prepare)
        assert code == 0, text
        assert "wrote wave-01/split-0001.jsonl: 6 split requests" in text
        assert "6 answers wait for their split" in text
        text = submit_and_collect(folder)
        code, text = dahl(*prepare)
        assert code == 0, text
        assert "wrote wave-02/check-0001.jsonl: 24 check requests" in text
        text = submit_and_collect(folder)
        assert "24 results stored" in text
        code, text = dahl(*prepare)
        assert "requests written: 0" in text
        mocks_before = mocks.stats(batch_url)["requests"]
        code, text = dahl("score", answers, "-o", str(tmp_path / "scored"), "--no-progress", *cache, *adapters,
                          *endpoint(batch_url))
        assert code == 0, text
        assert mocks.stats(batch_url)["requests"] == mocks_before == 0
        assert _claims(tmp_path / "scored") == _claims(tmp_path / "online")
        assert batch_stats(batch_url) == {"files_uploaded": 2, "batches_created": 2, "requests_split": 6,
                                          "requests_check": 24}


class TestExpiryAndErrors:
    def _prepared(self, tmp_path: Path, url: str, answers: int = 10) -> Path:
        source = str(write_answers(tmp_path / "answers.jsonl", answers, 10))
        folder = tmp_path / "batch"
        code, text = dahl("batch", "prepare", source, "-o", str(folder), "--splitter", "rules", "--checker", "openai",
                          *endpoint(url))
        assert code == 0, text
        return folder

    def test_expired_batch_with_30_percent_done_resubmits_exactly_the_other_70(
        self, tmp_path: Path, mocks: Any
    ) -> None:
        """100 checks, 30 done before expiry: collect stores those 30; resubmit writes exactly the other 70."""
        url = mocks.start("--batch-expire-fraction", "0.3")
        folder = self._prepared(tmp_path, url)
        ids = shard_ids(folder / "wave-01" / "check-0001.jsonl")
        assert len(ids) == 100
        dahl("batch", "submit", str(folder))
        code, text = dahl("batch", "collect", str(folder))
        assert code == 0, text
        assert "30 results stored, 70 unfinished" in text
        code, text = dahl("batch", "resubmit", str(folder), "--only", "expired")
        assert code == 0, text
        assert "requests to resubmit: 70" in text
        again = shard_ids(folder / "wave-01" / "check-0001-expired-0001.jsonl")
        assert again == ids[30:]
        code, text = dahl("batch", "resubmit", str(folder), "--only", "expired")
        assert "requests to resubmit: 0" in text  # once per shard and kind
        code, text = dahl("batch", "submit", str(folder))
        assert "batches submitted: 1" in text
        assert batch_stats(url)["batches_created"] == 2

    def test_failed_requests_are_counted_by_class_and_resubmitted_alone(self, tmp_path: Path, mocks: Any) -> None:
        """HTTP 500 result lines: never cached, counted as http_500, and exactly they go to --only failed."""
        url = mocks.start("--batch-error-rate", "0.2", "--seed", "3")
        folder = self._prepared(tmp_path, url)
        dahl("batch", "submit", str(folder))
        code, text = dahl("batch", "collect", str(folder))
        assert code == 0, text
        collected = ledger_events(folder, "collected")[0]
        failed = collected["errors"]["http_500:server_error"]
        assert failed > 0 and collected["succeeded"] == 100 - failed and collected["expired"] == 0
        assert f"http_500:server_error: {failed}" in text
        code, text = dahl("batch", "resubmit", str(folder), "--only", "failed")
        assert f"requests to resubmit: {failed}" in text
        code, text = dahl("batch", "prepare", str(tmp_path / "answers.jsonl"), "-o", str(folder),
                          "--checker", "openai", *endpoint(url))
        assert f"requests written: 0 ({failed} already in batches not yet collected)" in text


class TestKilledSubmit:
    def test_sigkill_mid_submit_then_restart_submits_each_batch_once(self, tmp_path: Path, mocks: Any) -> None:
        """SIGKILL after the first batch is recorded; the restart sends the rest; collect gets all 100, 0 resent."""
        url = mocks.start("--batch-call-delay-s", "0.4")
        source = str(write_answers(tmp_path / "answers.jsonl", 10, 10))
        folder = tmp_path / "batch"
        code, text = dahl("batch", "prepare", source, "-o", str(folder), "--checker", "openai", "--max-requests",
                          "25", *endpoint(url))
        assert code == 0 and "wave-01/check-0004.jsonl: 25" in text, text
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.Popen([sys.executable, "-m", "dahl", "batch", "submit", str(folder)], cwd=REPO, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while not (folder / "ledger.jsonl").exists() or not ledger_events(folder, "submitted"):
                assert proc.poll() is None and time.monotonic() < deadline, "submit ended before it was killed"
                time.sleep(0.02)
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait(timeout=30)
        assert len(ledger_events(folder, "submitted")) < 4
        code, text = dahl("batch", "submit", str(folder))
        assert code == 0, text
        code, text = dahl("batch", "collect", str(folder))
        assert code == 0 and "collected 4 batches: 100 results stored" in text, text
        stats = batch_stats(url)
        assert (stats["files_uploaded"], stats["batches_created"], stats["requests_check"]) == (4, 4, 100)
        code, text = dahl("batch", "prepare", source, "-o", str(folder), "--checker", "openai", *endpoint(url))
        assert "requests written: 0" in text


class TestRunningBatches:
    def test_collect_before_the_batch_ends_exits_6_and_status_shows_it_running(
        self, tmp_path: Path, mocks: Any
    ) -> None:
        """A batch that takes an hour: status says in_progress 0/100, collect stores nothing and exits 6."""
        url = mocks.start("--batch-complete-s", "3600")
        source = str(write_answers(tmp_path / "answers.jsonl", 10, 10))
        folder = tmp_path / "batch"
        dahl("batch", "prepare", source, "-o", str(folder), "--checker", "openai", *endpoint(url))
        dahl("batch", "submit", str(folder))
        code, text = dahl("batch", "status", str(folder))
        assert code == 0 and "in_progress (0/100 done)" in text, text
        code, text = dahl("batch", "collect", str(folder))
        assert code == 6 and "1 batches still running" in text, text
        code, text = dahl("batch", "cancel", str(folder))
        assert "batches canceled: 1" in text
        code, text = dahl("batch", "collect", str(folder))
        assert code == 0 and "0 results stored, 100 unfinished" in text, text


class TestFileProvider:
    def test_vllm_run_batch_output_is_collected_from_a_file(self, tmp_path: Path, mocks: Any) -> None:
        """--provider file writes OpenAI batch lines; their output file (as vllm run-batch writes it) is collected."""
        from urllib.request import Request, urlopen

        url = mocks.start()
        source = str(write_answers(tmp_path / "answers.jsonl", 3, 10))
        folder = tmp_path / "batch"
        code, text = dahl("batch", "prepare", source, "-o", str(folder), "--provider", "file", "--checker", "openai",
                          *endpoint(url))
        assert code == 0 and "30 check requests" in text, text
        code, text = dahl("batch", "submit", str(folder))
        assert code == 2 and "vllm run-batch" in text, text
        output = tmp_path / "out.jsonl"
        with output.open("w") as handle:  # what `vllm run-batch -i FILE -o out.jsonl` does, line by line
            for line in (folder / "wave-01" / "check-0001.jsonl").read_text().splitlines():
                request = json.loads(line)
                post = Request(url + "/chat/completions", data=json.dumps(request["body"]).encode(),
                               headers={"Content-Type": "application/json"})
                with urlopen(post) as reply:
                    body = json.loads(reply.read())
                handle.write(json.dumps({"id": "vllm-1", "custom_id": request["custom_id"],
                                         "response": {"status_code": 200, "body": body}, "error": None}) + "\n")
        code, text = dahl("batch", "collect", str(folder), "--from-file", str(output))
        assert code == 0 and "collected 1 batches: 30 results stored" in text, text
        before = mocks.stats(url)["requests"]
        code, text = dahl("score", source, "-o", str(tmp_path / "scored"), "--no-progress", "--checker", "openai",
                          *endpoint(url))
        assert code == 0, text
        assert mocks.stats(url)["requests"] == before == 30


class TestLostCreateReply:
    def test_a_batch_created_but_not_recorded_is_adopted_not_created_again(
        self, tmp_path: Path, mocks: Any
    ) -> None:
        """Killed between the create call and its ledger line: the restart finds the file's batch and records it."""
        import asyncio

        import aiohttp

        from dahl.batch._ledger import Ledger
        from dahl.batch._providers import OpenAIBatches, ShardTag

        url = mocks.start()
        source = str(write_answers(tmp_path / "answers.jsonl", 1, 10))
        folder = tmp_path / "batch"
        code, text = dahl("batch", "prepare", source, "-o", str(folder), "--checker", "openai", *endpoint(url))
        assert code == 0, text
        shard = folder / "wave-01" / "check-0001.jsonl"
        ledger = Ledger.read(folder)
        ledger.append({"event": "submitting", "shard": "wave-01/check-0001.jsonl", "key": "k" * 32, "at": time.time()})
        tag = ShardTag("k" * 32, time.time(), 10)

        async def upload_and_create() -> tuple[str | None, str]:
            async with aiohttp.ClientSession() as session:
                client = OpenAIBatches(session, url, "")
                file_id = await client.upload(shard, tag)
                return file_id, await client.create(shard, file_id, tag)  # its reply "lost": only the upload recorded

        file_id, created = asyncio.run(upload_and_create())
        ledger.append({"event": "uploaded", "shard": "wave-01/check-0001.jsonl", "file_id": file_id})
        code, text = dahl("batch", "submit", str(folder))
        assert code == 0 and f"submitted wave-01/check-0001.jsonl: {created}" in text, text
        assert batch_stats(url)["batches_created"] == 1
        assert batch_stats(url)["files_uploaded"] == 1
