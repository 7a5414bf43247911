"""dahl: async, high-throughput scoring of long-form LLM answers for factual hallucination."""
