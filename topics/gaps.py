"""Knowledge gaps, pure: within a failing topic, what the bot's knowledge is missing.

- questions a teammate answered after the bot failed: the question, the teammate's answer, and how often the topic
  asked it (its questions at least `SAME_QUESTION` cosine from it: the paraphrases count together);
- questions the grounded judge found no document for.

Each gap reads as a draft knowledge-base entry in Markdown (`draft`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from judges.safe_text import one_line, visible
from topics.questions import Question

SAME_QUESTION = 0.9
TEAMMATE = "teammate_answer"
NO_DOCUMENT = "no_document"


@dataclass(frozen=True)
class Gap:
    kind: str  # teammate_answer | no_document
    topic: str  # the topic's name
    question: Question
    answer: str | None  # the teammate's reply (None: no document answers it yet)
    asked: int  # how many of the topic's questions ask the same

    def as_dict(self) -> dict:
        return {
            "kind": self.kind,
            "topic": self.topic,
            "question": self.question.text,
            "answer": self.answer,
            "asked": self.asked,
            "channel": self.question.channel_id,
            "ts": self.question.ts,
        }


def gaps_of(topic: str, questions: Sequence[Question], vectors: np.ndarray) -> list[Gap]:
    """The gaps of one topic's questions (`vectors`: their unit rows, same order), most asked first. A question
    asked several ways gives one gap: the first one a teammate answered (else the first without a document)."""
    candidates = [i for i, q in enumerate(questions) if q.failed and (q.teammate_answer or q.no_document)]
    if not candidates:
        return []
    similarity = vectors[candidates] @ vectors.T
    taken: set[int] = set()
    gaps: list[Gap] = []
    # Teammate answers first: a gap with its answer is ready to paste.
    ordered = sorted(range(len(candidates)), key=lambda k: (questions[candidates[k]].teammate_answer is None, k))
    for k in ordered:
        index = candidates[k]
        if index in taken:
            continue
        same = np.flatnonzero(similarity[k] >= SAME_QUESTION)
        taken.update(int(i) for i in same)
        question = questions[index]
        kind = TEAMMATE if question.teammate_answer else NO_DOCUMENT
        gaps.append(Gap(kind, topic, question, question.teammate_answer, max(1, len(same))))
    gaps.sort(key=lambda gap: (-gap.asked, gap.kind != TEAMMATE))
    return gaps


def draft(gap: Gap) -> str:
    """The gap as a draft knowledge-base entry: the question as its title, the teammate's answer as its body. The
    texts are Slack's, so anything may be in them: a control character is shown (judges.safe_text), never sent
    as it is to the terminal or file the Markdown goes to."""
    title = one_line(gap.question.text)
    topic = one_line(gap.topic)
    times = "once" if gap.asked == 1 else f"{gap.asked} times"
    lines = [f"## {title}", ""]
    if gap.answer:
        lines += [
            visible(gap.answer.strip()),
            "",
            f"_Topic: {topic}. Asked {times}; a teammate answered after the bot failed._",
        ]
    else:
        lines += [
            "_No document answers this yet: write the answer here._",
            "",
            f"_Topic: {topic}. Asked {times}; the grounded judge found no document for it._",
        ]
    return "\n".join(lines) + "\n"


def drafts(gaps: Sequence[Gap]) -> str:
    """Every gap as one Markdown document."""
    head = "# Knowledge gaps: draft entries\n\n"
    return head + "\n".join(draft(gap) for gap in gaps) if gaps else head + "No knowledge gaps found.\n"
