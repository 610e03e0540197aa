"""The missed-failure alert as Block Kit: the judge scored an answer well, but the conversation says it failed
(`capture.outcomes.failed`). The same body as a low-score alert (privacy, quoting, feedback buttons, signals)."""

from __future__ import annotations

from common.messages.alerts import LowScoreAlert, alert_blocks, judge_label
from common.messages.blocks import MAX_BLOCKS, channel_mention, context, format_score, message


def missed_failure_alert(alert: LowScoreAlert) -> dict:
    """The judge scored the answer well, but the conversation says it failed (capture.outcomes.failed)."""
    score = format_score(alert.score, alert.max_score)
    label = judge_label(alert.judge)
    text = f"Missed failure in {channel_mention(alert.channel_id)}: {label.lower()} {score}, but the answer failed"
    blocks = alert_blocks(alert, f"Missed failure: {label.lower()} {score}")
    note = context(
        "_The judge scored this answer well, but the asker asked again and the conversation says it failed "
        "(counted as a judge disagreement in the feedback tally)._"
    )
    return message(text, [blocks[0], note, *blocks[1:]][:MAX_BLOCKS])
