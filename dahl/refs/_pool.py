"""Pooled reference sets: the union of several runs' supported claims per question
(as FactRBench pools strong models' answers), streamed; ``dahl refs build --pool RUN_DIR...``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from pathlib import Path

import msgspec

from dahl.results import _manifest as manifest
from dahl.errors import InputError
from dahl.formats._jsonpath import decode_json
from dahl.records import FactSource, Label, RefFact, RefSet, Status, content_id
from dahl.refs._dedupe import fact_key, near_groups

__all__ = ["ANSWERS_NAME", "check_output", "pool_runs"]

logger = logging.getLogger(__name__)

#: The answers file of a run folder.
ANSWERS_NAME = "answers.jsonl"


class _Claim(msgspec.Struct):
    text: str
    label: Label
    span: tuple[int, int] | None = None


class _Answer(msgspec.Struct):
    id: str
    status: Status
    claims: tuple[_Claim, ...] = ()
    question: str = ""
    question_id: str = ""


_DECODER = msgspec.json.Decoder(_Answer)


class _Fact:
    """A pooled fact while the runs are read: its text, first source, and stating answers."""

    __slots__ = ("answers", "source", "text")

    def __init__(self, text: str, source: FactSource) -> None:
        self.text = text
        self.source = source
        self.answers: set[tuple[int, str]] = set()  # (run, answer id): ids are unique per run only


class _Question:
    __slots__ = ("answers", "facts", "question")

    def __init__(self, question: str) -> None:
        self.question = question
        self.answers = 0
        self.facts: dict[str, _Fact] = {}  # fact_key -> fact, in first-seen order


def answers_path(run: str | Path) -> Path:
    """The answers file of ``run``: the folder's ``answers.jsonl``, or ``run`` itself if it is a file."""
    run = Path(run)
    return run / ANSWERS_NAME if run.is_dir() else run


#: The files of a run folder that an output must not replace.
_RUN_FILES = (ANSWERS_NAME, "summary.json", "manifest.json")


def check_output(out: str | Path, runs: Sequence[str | Path]) -> None:
    """Refuse an output path that is one of the pooled runs' own files.

    Raises:
        InputError: ``out`` is a run's answers file, ``summary.json``, ``manifest.json``
            or inside its ``verdicts/`` folder.
    """
    target = Path(out).resolve()
    for run in runs:
        run = Path(run)
        own = [answers_path(run).resolve()]
        if run.is_dir():
            own += [(run / name).resolve() for name in _RUN_FILES]
            if (run / "verdicts").resolve() in target.parents:
                own.append(target)
        if target in own:
            raise InputError(f"the output would overwrite a file of the pooled run {run}", file=str(out))


def pool_runs(
    runs: Sequence[str | Path],
    *,
    fold: bool = False,
    near: float | None = None,
    keep_empty: bool = True,
    require_complete: bool = True,
) -> list[RefSet]:
    """Pool the supported claims of ``runs`` into one reference set per question.

    Args:
        runs: run folders (each with ``answers.jsonl``) or answers files, in priority order.
        fold: also merge facts equal after case-folding and stripping end punctuation.
        near: merge near duplicates at this rapidfuzz ratio (0-100); None: off.
        keep_empty: also emit questions with no supported claim (an empty set).
        require_complete: a run folder must have a manifest in state ``complete``.

    Returns:
        The sets in order of each question's first answer; facts by support (most first), ties in
        first-seen order, with ids :func:`~dahl.records.content_id` of their text, ``support`` and
        ``source``; ``meta`` = ``{"pooled_answers": answers read for the question}``.

    Raises:
        InputError: no runs, a run given twice, a run without answers, an unfinished run, or a line
            that is not an answer result (names file, line and field).
    """
    if not runs:
        raise InputError("pooling needs at least one run")
    seen: set[Path] = set()
    for run in runs:
        path = answers_path(run).resolve()
        if path in seen:  # its answers would count twice in every fact's support
            raise InputError("this run is given twice", file=str(run))
        seen.add(path)
    questions: dict[str, _Question] = {}
    for n, run in enumerate(runs):
        _read_run(Path(run), n, questions, require_complete=require_complete)
    return list(_sets(questions, fold=fold, near=near, keep_empty=keep_empty))


def _read_run(run: Path, run_no: int, questions: dict[str, _Question], *, require_complete: bool) -> None:
    """Add every answer of ``run`` to ``questions``."""
    path = answers_path(run)
    if require_complete and run.is_dir():
        state = (manifest.read_manifest(run) or {}).get("state")
        if state != manifest.COMPLETE:
            raise InputError(f"run {str(run)!r} is not finished (manifest state {state!r}); finish it with "
                             "dahl score, or pool its answers file", file=str(run / manifest.MANIFEST_NAME))
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read answers: {exc.strerror}", file=str(path)) from None
    n = 0
    with handle:
        for line_no, line in enumerate(handle, 1):
            if not line.strip():
                continue
            answer = decode_json(_DECODER, line, file=str(path), line=line_no, invalid="not an answer result: ")
            _add(answer, run_no, questions, path, line_no)
            n += 1
    logger.info("pooled %d answers from %s", n, path)


def _add(answer: _Answer, run_no: int, questions: dict[str, _Question], path: Path, line_no: int) -> None:
    qid = answer.question_id or (content_id(answer.question) if answer.question else "")
    if not qid:
        raise InputError(f"answer {answer.id!r} has neither question_id nor question", file=str(path), line=line_no,
                         field="question_id")
    entry = questions.get(qid)
    if entry is None:
        entry = questions[qid] = _Question(answer.question)
    entry.answers += 1
    if answer.status == Status.ERROR:
        return
    for claim in answer.claims:
        if claim.label != Label.SUPPORTED:
            continue
        key = fact_key(claim.text)
        fact = entry.facts.get(key)
        if fact is None:
            fact = entry.facts[key] = _Fact(key, FactSource(answer_id=answer.id, span=claim.span))
        fact.answers.add((run_no, answer.id))


def _sets(questions: dict[str, _Question], *, fold: bool, near: float | None, keep_empty: bool) -> Iterator[RefSet]:
    for qid, entry in questions.items():
        groups = _merge(list(entry.facts.values()), fold=fold, near=near)
        if not groups and not keep_empty:
            continue
        facts = []
        for group in groups:
            head = group[0]
            stated: set[tuple[int, str]] = set().union(*(f.answers for f in group))
            facts.append(RefFact(id=content_id(head.text), text=head.text, source=head.source, support=len(stated)))
        facts.sort(key=lambda f: -(f.support or 0))  # stable: ties keep first-seen order
        yield RefSet(question_id=qid, question=entry.question, facts=tuple(facts),
                     meta={"pooled_answers": entry.answers})


def _merge(facts: list[_Fact], *, fold: bool, near: float | None) -> list[list[_Fact]]:
    """Groups of duplicate facts, each led by its first-seen fact, in first-seen order."""
    groups: list[list[_Fact]] = []
    if fold:
        by_key: dict[str, list[_Fact]] = {}
        for fact in facts:
            by_key.setdefault(fact_key(fact.text, fold=True), []).append(fact)
        groups = list(by_key.values())
    else:
        groups = [[f] for f in facts]
    if near is None:
        return groups
    merged = near_groups([g[0].text for g in groups], near)
    return [[f for i in idx for f in groups[i]] for idx in merged]
