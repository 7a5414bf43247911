"""Exam questions from articles (``dahl questions build``) and their checks (``dahl questions lint``)."""
