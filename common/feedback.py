"""The feedback tally: people say whether the judge was right about an alert. One vote per person,
changeable, so the tally counts each person's latest vote."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

VOTE_RIGHT = "right"
VOTE_WRONG = "wrong"
VOTES = (VOTE_RIGHT, VOTE_WRONG)
# Button action_ids on alerts; the button value is the judgment id.
ACTION_RIGHT = "feedback_right"
ACTION_WRONG = "feedback_wrong"
VOTE_FOR_ACTION = {ACTION_RIGHT: VOTE_RIGHT, ACTION_WRONG: VOTE_WRONG}


@dataclass(frozen=True)
class Tally:
    right: int = 0
    wrong: int = 0

    @property
    def total(self) -> int:
        return self.right + self.wrong

    @property
    def agreement(self) -> float | None:
        """Share of voters who say the judge was right (None without votes)."""
        return self.right / self.total if self.total else None


def tally(votes: Iterable[tuple[str, str]]) -> Tally:
    """Count (user_id, vote) pairs in the order they were cast: a person's later vote replaces the
    earlier one; unknown votes are ignored."""
    latest: dict[str, str] = {}
    for user_id, vote in votes:
        if vote in VOTES:
            latest[user_id] = vote
    right = sum(1 for vote in latest.values() if vote == VOTE_RIGHT)
    return Tally(right=right, wrong=len(latest) - right)


def describe_votes(votes: Tally) -> str:
    """One line for the alert: what people said so far."""
    if not (votes.right or votes.wrong):
        return "No feedback yet: was the judge right?"
    right = f"{votes.right} {'says' if votes.right == 1 else 'say'} the judge was right"
    wrong = f"{votes.wrong} {'says' if votes.wrong == 1 else 'say'} it was wrong"
    return f"Feedback: {right} · {wrong}"


def label_from_votes(score: float, right: int, wrong: int, threshold: float | None, max_score: int) -> int | None:
    """A human label from the votes on an alert: people agreed → the judge's own score; they disagreed → the
    lowest score that would not have alerted (the answer was fine, by how much nobody said); a tie or no
    threshold → no label."""
    if right == wrong or threshold is None:
        return None
    if right > wrong:
        return int(score)
    return min(int(threshold) + 1, max_score)
