"""The example of docs/python-api.md: score answers held in memory, offline (fake Checker)."""

from pathlib import Path

import dahl

answers = [
    {"id": "a1", "model": "m", "question": "What does aspirin do?",
     "response": "Aspirin inhibits COX-1. It reduces fever."},
    {"id": "a2", "model": "m", "question": "What is metformin for?",
     "response": "Metformin lowers blood glucose in type 2 diabetes."},
    {"id": "a3", "model": "m", "question": "What is warfarin?"},  # no response: skipped, reported
]
config = dahl.ScoreConfig(inputs=answers, out_dir=Path("out"), adapters=dahl.AdapterSettings(checker="fake"))
report = dahl.score(config)  # in a notebook or async code: report = await dahl.score_async(config)

print(report.exit_status.name, report.exit_status.value)  # PARTIAL 6: one record skipped
print(report.input_errors[0])
m = report.summary["models"]["m"]
print(m["n_answers"], "answers,", sum(m["labels"].values()), "claims, DAHL Score", round(m["dahl_score"], 3))
