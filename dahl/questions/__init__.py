"""Benchmark questions: the checks a question set is filtered by, and the lint report.

:mod:`dahl.questions._checks` holds the checks (context dependence, duplicates, categories);
:mod:`dahl.questions._lint` reads a DAHL-style ``question, category`` CSV and reports them.
"""
