"""The mock's answers to check prompts that carry evidence passages (template check-evidence/v1)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.mock_oracle import Oracle
from bench.mock_reply import parse_prompt, reply_content
from dahl.adapters import _prompts as prompts

PASSAGES = [("d1#0-10", "Drug", "Drug lowers glucose."), ("d2#0-5", "", "Other text.")]


def _body(claim: str, *, evidence: bool = True, json_mode: bool = False) -> dict[str, object]:
    messages = prompts.check_messages("Q?", claim, PASSAGES if evidence else None, json_reply=json_mode)
    body: dict[str, object] = {"model": "mock", "messages": messages}
    if json_mode:
        body["response_format"] = {"type": "json_object"}
    return body


def _oracle(tmp_path: Path) -> Oracle:
    row = {"question": "Q?", "response": "r", "claims": [
        {"text": "A is true.", "label": "supported"},
        {"text": "B is false.", "label": "unsupported", "reason": "contradicted"},
        {"text": "C is unsaid.", "label": "unsupported"},
    ]}
    path = tmp_path / "oracle.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    return Oracle.load([path])


class TestEvidenceReplies:
    def test_passage_ids_parsed_from_the_blocks(self) -> None:
        """parse_prompt lists the source ids of the evidence blocks, in order."""
        assert parse_prompt(_body("A is true.")).passages == ("d1#0-10", "d2#0-5")
        assert parse_prompt(_body("A is true.", evidence=False)).passages == ()

    def test_labels_and_reasons_from_the_oracle(self, tmp_path: Path) -> None:
        """supported stays; unsupported is contradicted when the oracle says so, else not supported; unknown too."""
        oracle = _oracle(tmp_path)
        replies = [reply_content(parse_prompt(_body(c)), oracle).splitlines()[0]
                   for c in ("A is true.", "B is false.", "C is unsaid.", "D is absent.")]
        assert replies == ["Supported", "Contradicted", "Not supported by the evidence", "Not supported by the evidence"]

    def test_json_reply_names_the_passages(self, tmp_path: Path) -> None:
        """A JSON-mode reply has the evidence label and a reason naming the passage ids."""
        reply = json.loads(reply_content(parse_prompt(_body("B is false.", json_mode=True)), _oracle(tmp_path)))
        assert reply == {"label": "contradicted", "reason": "Oracle label; passages: d1#0-10, d2#0-5."}

    def test_without_evidence_a_contradicted_claim_is_unsupported(self, tmp_path: Path) -> None:
        """The check/v1 prompt keeps its four labels: a contradicted oracle claim is answered Unsupported."""
        assert reply_content(parse_prompt(_body("B is false.", evidence=False)), _oracle(tmp_path)) == (
            "Unsupported\nOracle label."
        )
