"""A week too small to group into topics still shows its failed questions in groups: by the words they share.

Below `RELMON_TOPICS_MIN_QUESTIONS` nothing is embedded (the clustering is not reliable there, bench.topics_size),
so the rule is plain: the word of substance that most of the ungrouped failed questions share (English stop words
left out, a plural's s cut) makes a group of them, then the next, while a word is shared by two or more; each
question left over stands alone. Pure and deterministic: the same questions give the same groups, largest first.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from topics.questions import Question


def _stop_words() -> frozenset[str]:
    """scikit-learn's English stop words, loaded on first use: the digest's worker imports this module, and
    scikit-learn (with scipy's native threads) costs every process that never groups a small week."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return ENGLISH_STOP_WORDS


_WORD = re.compile(r"[^\W\d_]{3,}")
_NOISE = frozenset({"hi", "hello", "thanks", "thank", "please", "help", "team", "question", "issue", "problem"})


@dataclass(frozen=True)
class FailedGroup:
    keyword: str | None  # the word its questions share; None: a question on its own
    questions: tuple[Question, ...]


def keywords(text: str) -> frozenset[str]:
    words = set()
    for word in _WORD.findall(text.lower()):
        if word in _stop_words() or word in _NOISE:
            continue
        words.add(word[:-1] if word.endswith("s") and len(word) > 4 and not word.endswith("ss") else word)
    return frozenset(words)


def failed_groups(failed: Sequence[Question]) -> tuple[FailedGroup, ...]:
    """The failed questions in groups sharing a keyword (largest first), then each question left alone."""
    words = [keywords(q.text) for q in failed]
    left = list(range(len(failed)))
    groups: list[FailedGroup] = []
    while left:
        counts = Counter(word for i in left for word in words[i])
        if not counts:
            break
        # The most shared word; ties to the alphabetically first, so the grouping does not depend on set order.
        word, shared = min(counts.items(), key=lambda item: (-item[1], item[0]))
        if shared < 2:
            break
        members = [i for i in left if word in words[i]]
        groups.append(FailedGroup(word, tuple(failed[i] for i in members)))
        left = [i for i in left if i not in members]
    return (*groups, *(FailedGroup(None, (failed[i],)) for i in left))
