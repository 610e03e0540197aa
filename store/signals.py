"""The outcome signals' names, their one home: what a conversation said of an answer after it (the rules that find
them are in `capture.outcomes`), as the `outcome_signals` table stores them. A leaf that loads nothing, so the
golden set's pure rules and the reports read the names without the capture rules."""

from __future__ import annotations

REASK = "reask"
HUMAN_TAKEOVER = "human_takeover"
ESCALATION = "escalation"
NEGATIVE_REACTION = "negative_reaction"
POSITIVE_REACTION = "positive_reaction"
THANKED = "thanked"
RESOLVED = "resolved"
NEW_QUESTION = "new_question"
SIGNALS = (REASK, HUMAN_TAKEOVER, ESCALATION, NEGATIVE_REACTION, POSITIVE_REACTION, THANKED, RESOLVED, NEW_QUESTION)
# Any one of these says the answer may have failed: such an answer is always judged, whatever RELMON_SAMPLE says
# (workers.sampling). The same names as capture.outcomes.FAILURE_SIGNALS, which the reports' outcome labels use.
ALWAYS_JUDGED = frozenset({REASK, HUMAN_TAKEOVER, ESCALATION, NEGATIVE_REACTION})
