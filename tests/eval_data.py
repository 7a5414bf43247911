"""The PubMedQA / MedHallu benchmark of the ``dahl eval`` tests: questions, two oracles, a corpus.

Also run by hand for the full 1,000 questions::

    python -m tests.eval_data OUT_FOLDER BASE_URL [LIMIT]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from dahl.records import normalize_text

TRUTHFUL = "truthful"
HALLUCINATING = "hallucinating"


def write_benchmark(folder: Path, pubmedqa: Path, medhallu: Path, limit: int | None = None) -> int:
    """Write the eval's inputs into ``folder``; return the number of questions.

    PubMedQA's questions (in pmid order, the first ``limit``) that MedHallu also holds
    (joined on the normalized question); "truthful" answers each with PubMedQA's
    LONG_ANSWER, "hallucinating" with MedHallu's hallucinated answer; the corpus holds
    one document per pmid (its CONTEXTS). The mock serves both models
    (:func:`oracle_args`); :func:`write_config` writes the config.
    """
    articles = json.loads(pubmedqa.read_text(encoding="utf-8"))
    hallucinated: dict[str, str] = {}
    for line in medhallu.read_text(encoding="utf-8").split("\n"):  # not splitlines: texts hold U+2028
        if not line.strip():
            continue
        row = json.loads(line)
        hallucinated[normalize_text(row["Question"])] = row["Hallucinated Answer"]
    pmids = [pmid for pmid in sorted(articles) if normalize_text(articles[pmid]["QUESTION"]) in hallucinated]
    pmids = pmids[:limit] if limit is not None else pmids
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "questions.jsonl").open("w", encoding="utf-8") as q, \
            (folder / f"{TRUTHFUL}.jsonl").open("w", encoding="utf-8") as t, \
            (folder / f"{HALLUCINATING}.jsonl").open("w", encoding="utf-8") as h, \
            (folder / "corpus.jsonl").open("w", encoding="utf-8") as c:
        for pmid in pmids:
            article = articles[pmid]
            question = article["QUESTION"]
            q.write(json.dumps({"question_id": pmid, "question": question}) + "\n")
            t.write(json.dumps({"question": question, "response": article["LONG_ANSWER"]}) + "\n")
            h.write(json.dumps({"question": question, "response": hallucinated[normalize_text(question)]}) + "\n")
            c.write(json.dumps({"id": pmid, "text": " ".join(article["CONTEXTS"])}) + "\n")
    return len(pmids)


def write_config(folder: Path, base_url: str) -> Path:
    """Write ``folder/eval.toml``: both models at ``base_url`` (chat), rules Splitter, evidence Checker."""
    models = "".join(f'\n[[models]]\nname = "{name}"\nbase_url = "{base_url}"\n' for name in (TRUTHFUL, HALLUCINATING))
    config = folder / "eval.toml"
    config.write_text(
        'output = "out"\n\n[questions]\nfile = "questions.jsonl"\n\n'
        '[generate]\nmode = "chat"\napi_key_env = ""\n'
        f"{models}\n"
        '[split]\nkind = "rules"\n\n[check]\nkind = "evidence"\nevidence = "corpus.jsonl"\n\n'
        '[leaderboard]\nmetric = "dahl_score"\ncompare = "all"\n',
        encoding="utf-8",
    )
    return config


def oracle_args(folder: Path) -> list[str]:
    """The mock's flags answering each model from its oracle file."""
    return [arg for name in (TRUTHFUL, HALLUCINATING) for arg in ("--oracle-answers", f"{name}={folder / name}.jsonl")]


if __name__ == "__main__":  # pragma: no cover
    from tests.conftest import shared_data_dir

    if len(sys.argv) not in (3, 4) or sys.argv[1].startswith("-"):
        sys.exit("usage: python -m tests.eval_data FOLDER MOCK_URL [N_QUESTIONS]")
    data = shared_data_dir()
    folder = Path(sys.argv[1])
    write_benchmark(folder, data / "pubmedqa" / "ori_pqal.json", data / "medhallu" / "medhallu_pqa_labeled.jsonl",
                    int(sys.argv[3]) if len(sys.argv) > 3 else None)
    print(write_config(folder, sys.argv[2]), " ".join(oracle_args(folder)))
