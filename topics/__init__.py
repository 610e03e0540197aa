"""Topics and knowledge gaps: what to fix first.

A period's questions are embedded (the configured OpenAI-compatible endpoint, or a local TF-IDF fallback), grouped
with HDBSCAN (no fixed number of topics; outliers stay out, never more than half), named by the judge LLM, and
ranked by failed questions; within the failing topics, the questions a teammate answered after the bot failed and
those no document answers are the knowledge gaps, each a draft knowledge-base entry.

The core (`questions`, `clustering`, `local_embeddings`, `figures`, `matching`, `gaps`, `naming`, `build`) is pure
functions over plain data; `embeddings` (the endpoint) and `service` (the store, the budget) are the adapters.
Imports `store`, `capture` (outcome signal names) and `judges` only.
"""
