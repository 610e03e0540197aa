"""How a judge's agreement with the team reads (common.messages.agreement): in the digest (Block Kit and terminal)
and the App Home, "too few" below the minimum of labels, links and scores for the disagreements, never words."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from common.messages.agreement import channel_parts, corrected_text, disagreement_text, judge_lines, kappa_text
from common.messages.digest import digest_message, digest_text
from common.messages.home import home_view
from common.reports.agreement import Disagreement
from common.reports.costs import Prices
from common.reports.kappa import cohen_kappa, ppi_failure_rate
from common.reports.period import period_for
from store.rules import ChannelRules
from store.settings import Settings
from store.signals import HUMAN_TAKEOVER, REASK, RESOLVED
from store.stats_queries import JudgmentRow, PairRow
from tests.report_tallies import build_report

NOW = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
PERIOD = period_for(NOW, "UTC")
_ids = iter(range(1, 1_000_000))


def row(score, *, right=0, wrong=0, signals=None, channel="C1") -> PairRow:
    pair_id = next(_ids)
    judgment = JudgmentRow(pair_id, "relevancy", "ok", score, 4, score / 4, votes_right=right, votes_wrong=wrong)
    return PairRow(
        pair_id, channel, NOW - timedelta(days=1), "judged", answer_ts=f"1.{pair_id:06d}", judgments=(judgment,),
        window_closed=signals is not None, signals=tuple(signals or ()),
    )  # fmt: skip


def labelled_week() -> list[PairRow]:
    return [
        *(row(1, right=1) for _ in range(9)),
        *(row(0, wrong=1) for _ in range(2)),
        *(row(4, signals=[REASK, HUMAN_TAKEOVER]) for _ in range(4)),
        *(row(3, signals=[RESOLVED]) for _ in range(15)),
        *(row(4) for _ in range(30)),
    ]


def report_of(rows):
    return build_report(PERIOD, rows, [], lambda _channel: {"relevancy": 2}, Prices(0.15, 0.6))


def test_the_digest_and_home_show_kappa_matrix_and_corrected_rate():
    report = report_of(labelled_week())
    table = ((9, 2), (4, 15))
    kappa, rate = cohen_kappa(table), ppi_failure_rate(60, 11, table).rate
    lines = judge_lines(report.agreement, ["relevancy"], {})
    assert lines[0] == (
        f"relevancy vs the team: kappa {kappa.value:.2f} ({kappa.interval.low:.2f}–"
        f"{kappa.interval.high:.2f}, n=30: 11 votes, 19 outcomes) · judge × team: fail·fail 9, fail·pass 2, "
        "pass·fail 4, pass·pass 15"
    )
    assert lines[1] == (
        f"relevancy failure rate: the judge says 18% failed (n=60); corrected by 30 team labels: "
        f"{rate.value * 100:.0f}% ({rate.low * 100:.0f}–{rate.high * 100:.0f}%)"
    )
    assert lines[2].startswith("relevancy, latest disagreements: judge pass 4, team fail (outcome) in <#C1>")

    blocks = json.dumps(digest_message(report, {}, {})["blocks"], ensure_ascii=False)
    for line in lines:
        assert json.dumps(line, ensure_ascii=False)[1:-1] in blocks
    assert "relevancy vs the team kappa" in blocks  # the channel's line
    text = digest_text(report, {}, {})
    assert "relevancy vs the team: kappa" in text and "team fail (outcome) in #C1" in text

    settings = Settings(_env_file=None, judge_model="m1")
    home = home_view(report, settings, ChannelRules().for_channel(None, settings), {}, now=NOW)
    shown = json.dumps(home["blocks"], ensure_ascii=False)
    assert json.dumps(lines[1], ensure_ascii=False)[1:-1] in shown
    assert "relevancy vs the team kappa" in shown


def test_too_few_labels_say_so_and_a_week_without_labels_says_nothing():
    few = report_of([*(row(1, right=1) for _ in range(3)), *(row(4, signals=[RESOLVED]) for _ in range(4))])
    found = few.agreement.of(None, "relevancy")
    assert kappa_text(found.kappa) == "too few team labels (n=7)"
    assert corrected_text(found).endswith(
        "too few team labels to correct it (n=7; 10 needed, 5 among the answers it failed and among those it passed)"
    )
    assert channel_parts(few.agreement, "C1", ["relevancy"]) == ["relevancy vs the team: too few team labels (n=7)"]
    assert judge_lines(report_of([row(4) for _ in range(20)]).agreement, ["relevancy"], {}) == []
    assert channel_parts(report_of([row(4) for _ in range(20)]).agreement, "C1", ["relevancy"]) == []


def test_an_undefined_or_negative_kappa_reads_plainly():
    assert kappa_text(cohen_kappa([[12, 0], [0, 0]])).startswith("kappa undefined")
    assert kappa_text(cohen_kappa([[2, 10], [10, 3]])).startswith("kappa −0.")
    assert " to " in kappa_text(cohen_kappa([[2, 10], [10, 3]]))


def test_a_disagreement_is_a_link_and_scores():
    found = Disagreement(7, "C1", "1.000007", "relevancy", 1.0, True, "vote")
    assert disagreement_text(found, {7: "https://x/p1"}) == "<https://x/p1|judge fail 1, team pass (vote)>"
    assert disagreement_text(found, {}, slack=False) == "judge fail 1, team pass (vote) in #C1"


def test_a_significant_fall_is_marked_in_the_digest():
    steady = [
        *(row(1, right=1) for _ in range(12)),
        *(row(4, signals=[RESOLVED]) for _ in range(20)),
        *(row(1, wrong=1) for _ in range(2)),
        *(row(4, signals=[REASK, HUMAN_TAKEOVER]) for _ in range(2)),
    ]
    drifted = [
        *(row(1, right=1) for _ in range(6)),
        *(row(1, wrong=1) for _ in range(8)),
        *(row(4, signals=[REASK, HUMAN_TAKEOVER]) for _ in range(10)),
        *(row(4, signals=[RESOLVED]) for _ in range(10)),
    ]
    before = cohen_kappa(((12, 2), (2, 20)))
    report = build_report(PERIOD, drifted, steady, lambda _channel: {"relevancy": 2}, Prices(0.15, 0.6))
    (first, *_) = judge_lines(report.agreement, ["relevancy"], {})
    assert first.endswith(f" · ▼ from kappa {before.value:.2f} the week before (significant)")
    assert f"▼ from kappa {before.value:.2f} the week before" in " ".join(
        channel_parts(report.agreement, "C1", ["relevancy"])
    )
    steady_again = build_report(PERIOD, steady, steady, lambda _channel: {"relevancy": 2}, Prices(0.15, 0.6))
    assert "▼" not in " ".join(judge_lines(steady_again.agreement, ["relevancy"], {}))
