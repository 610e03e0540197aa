"""Topic names, pure: the naming prompt (one LLM call per new topic), the check a name must pass (`name_problem`),
the prompt that asks once more saying what was wrong, and the keyword name used when no LLM may be asked (budget
spent, endpoint down) or its name failed the check twice.

The prompt's constant part (the instructions) comes first and the topic's example questions last, so a provider's
prompt cache serves the same beginning to every call."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, TfidfVectorizer

EXAMPLES = 5
NAME_CHARS = 60
MIN_WORDS, MAX_WORDS = 2, 6
INSTRUCTIONS = (
    "You name topics of customer-support questions. You are given a few questions that customers asked a support "
    "bot; they are about one topic. Reply with a short, human name for that topic: 2 to 6 words, sentence case, "
    "no quotes, no final period, naming what the customers need (for example: Refunds for annual plans; SSO login "
    "with Okta; Exporting data to CSV). Reply with the name only."
)


def naming_messages(examples: Sequence[str], rejected: tuple[str, str] | None = None) -> list[dict[str, str]]:
    """The chat messages that ask for one topic's name: the instructions, then its example questions. `rejected`
    (the earlier reply, what was wrong with its name): the same conversation asked once more, the reply and what
    was wrong added last, so the beginning stays the one the provider's prompt cache already holds."""
    listed = "\n".join(f"- {' '.join(text.split())[:300]}" for text in examples[:EXAMPLES])
    messages = [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": f"Questions:\n{listed}\n\nName of the topic:"},
    ]
    if rejected is not None:
        reply, problem = rejected
        messages += [
            {"role": "assistant", "content": reply},
            {
                "role": "user",
                "content": f"That name cannot be used: {problem}. Reply with another name for the topic: "
                f"{MIN_WORDS} to {MAX_WORDS} ordinary words saying what the customers need, no IDs or numbers "
                "alone. Reply with the name only.",
            },
        ]
    return messages


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


# scikit-learn's English stop words, less the ones that are a topic's words in a support channel ("Bill amount",
# "Call back", "System status"): a name made only of the rest ("The", "Of it", "Something else") names nothing.
_TOPIC_WORDS = frozenset(
    {"amount", "back", "bill", "bottom", "call", "describe", "detail", "empty", "find", "fire", "front", "full"}
    | {"interest", "move", "name", "part", "show", "side", "system", "thick", "thin", "top"}
)
STOP_WORDS = frozenset(ENGLISH_STOP_WORDS) - _TOPIC_WORDS
# A word: "SSO", "Okta's", "v2.1", "e-mail", "C0SUPPORT1", "1712345678.123456".
_WORD = re.compile(r"[^\W_]+(?:['’.\-][^\W_]+)*")
# What an ID looks like: a Slack ID (C0SUPPORT1, U123ABC: a type letter, then capitals and digits with a digit),
# a Slack ts, a hash (7+ hex digits with a digit and a letter), a UUID.
_SLACK_ID = re.compile(r"[CDGUWBTEFAR][A-Z0-9]{6,}")
_TS = re.compile(r"\d{9,}\.\d+")
_HEX = re.compile(r"[0-9a-f]{7,}", re.IGNORECASE)
_UUID = re.compile(r"[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}", re.IGNORECASE)


def _is_id(word: str) -> bool:
    if _UUID.fullmatch(word) or _TS.fullmatch(word):
        return True
    has_digit, has_letter = any(c.isdigit() for c in word), any(c.isalpha() for c in word)
    if _SLACK_ID.fullmatch(word) and has_digit:
        return True
    return bool(_HEX.fullmatch(word) and has_digit and has_letter)


def name_problem(name: str | None) -> str | None:
    """What is wrong with a topic's name (None: nothing): it must be 2 to 6 words, not only stop words, hold no ID
    (a Slack ID, a ts, a hash) and not be only numbers or punctuation. The reason never repeats the name: it is
    logged, and the name was made of the questions' words."""
    text = (name or "").strip()
    if not text:
        return "it is empty"
    words = _WORD.findall(text)
    if not any(c.isalpha() for word in words for c in word):
        return "it has no words, only numbers or punctuation"
    if any(_is_id(word) for word in words):
        return "it holds an ID (a Slack channel or user ID, a timestamp or a hash), not words"
    if all(word.lower() in STOP_WORDS for word in words):
        return "it is made only of stop words" if len(words) > 1 else "it is a stop word"
    if len(words) < MIN_WORDS:
        return f"it is one word (a name has {MIN_WORDS} to {MAX_WORDS})"
    if len(words) > MAX_WORDS:
        return f"it has {len(words)} words (a name has {MIN_WORDS} to {MAX_WORDS})"
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
