"""Topic names, pure: the naming prompt (one LLM call per new topic) and the keyword name used when no LLM may
be asked (budget spent, endpoint down).

The prompt's constant part (the instructions) comes first and the topic's example questions last, so a provider's
prompt cache serves the same beginning to every call."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

EXAMPLES = 5
NAME_CHARS = 60
INSTRUCTIONS = (
    "You name topics of customer-support questions. You are given a few questions that customers asked a support "
    "bot; they are about one topic. Reply with a short, human name for that topic: 2 to 6 words, sentence case, "
    "no quotes, no final period, naming what the customers need (for example: Refunds for annual plans; SSO login "
    "with Okta; Exporting data to CSV). Reply with the name only."
)


def naming_messages(examples: Sequence[str]) -> list[dict[str, str]]:
    """The chat messages that ask for one topic's name: the instructions, then its example questions."""
    listed = "\n".join(f"- {' '.join(text.split())[:300]}" for text in examples[:EXAMPLES])
    return [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": f"Questions:\n{listed}\n\nName of the topic:"},
    ]


def parse_name(reply: str) -> str | None:
    """The name in an LLM's reply (its first non-empty line, without quotes, labels or a final period)."""
    for line in reply.splitlines():
        name = line.strip().strip("*`\"'“”").strip()
        if name.lower().startswith(("name:", "topic:", "name of the topic:")):
            name = name.split(":", 1)[1].strip().strip("\"'“”")
        name = name.rstrip(".").strip()
        if name:
            return name[:NAME_CHARS]
    return None


def keyword_names(texts_by_topic: Sequence[Sequence[str]], words: int = 3) -> list[str]:
    """A name for each topic from the words that set it apart from the others (class-based TF-IDF):
    "Refund, annual, plan"."""
    documents = [" ".join(texts) for texts in texts_by_topic]
    if not documents:
        return []
    try:
        vectorizer = TfidfVectorizer(stop_words="english", sublinear_tf=True)
        matrix = vectorizer.fit_transform(documents)
    except ValueError:
        return ["Other questions" for _ in documents]
    vocabulary = np.array(vectorizer.get_feature_names_out())
    names = []
    for row in matrix:
        weights = row.toarray().ravel()
        top = [vocabulary[i] for i in np.argsort(-weights, kind="stable")[:words] if weights[i] > 0]
        names.append(", ".join(top).capitalize() if top else "Other questions")
    return names
