"""The digest chart's topics panel: failed questions by topic this week, with the week before beside each (the
top topics of "What to fix first", most failed at the top)."""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.axes import Axes
from matplotlib.ticker import MaxNLocator

from common.reports.topics import TopicBar

PANEL_HEIGHT = 0.45  # inches per topic
THIS_WEEK = "#d9534f"
WEEK_BEFORE = "#c9d6e3"
MUTED = "#5a6b7b"
LABEL_CHARS = 28


def panel_height(bars: Sequence[TopicBar]) -> float:
    return 1.4 + PANEL_HEIGHT * len(bars) if bars else 0.0


def _label(name: str) -> str:
    return name if len(name) <= LABEL_CHARS else name[: LABEL_CHARS - 1] + "…"


def topics_panel(axes: Axes, bars: Sequence[TopicBar]) -> None:
    rows = list(reversed(bars))  # matplotlib draws the first bar at the bottom
    positions = range(len(rows))
    height = 0.38
    axes.barh([p + height / 2 for p in positions], [b.failed for b in rows], height, color=THIS_WEEK, label="this week")
    # A week before without questions is said in the title, not drawn as bars of 0.
    compared = any(b.previous_failed is not None for b in rows)
    if compared:
        before = [b.previous_failed or 0 for b in rows]
        axes.barh([p - height / 2 for p in positions], before, height, color=WEEK_BEFORE, label="week before")
    axes.set_yticks(list(positions), [_label(b.name) for b in rows])
    axes.set_title("Failed questions by topic" + ("" if compared else "\n(no data the week before)"))
    axes.set_xlabel("failed questions")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))  # whole questions: no 2.5 on the axis
    axes.tick_params(axis="y", colors=MUTED)
    axes.legend(loc="lower right", frameon=False)
    axes.spines["right"].set_visible(False)
