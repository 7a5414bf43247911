"""Benchmark questions: the checks a question set is filtered by, and the lint report.

:mod:`dahl.questions.checks` holds the checks (context dependence, duplicates, categories);
:mod:`dahl.questions.lint` reads a DAHL-style ``question, category`` CSV and reports them.
"""
