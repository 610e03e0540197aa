"""A team's judge in the digest and App Home read from the store: its pass rate per channel where it runs, its scale
from its file, and its prompt versions numbered from the judgments stored ("v3 since Tue"), never compared."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from common.messages.digest import digest_text
from common.messages.home import home_view
from common.reports.figures import load_report
from common.reports.intervals import wilson
from common.reports.period import period_for
from store.models import Judgment, Pair
from tests.builders import make_settings

NOW = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)  # a Thursday
TONE = """name = "tone"
scale = "1..5"
fails_at = 2
prompt = '''Is the answer polite? {answer}'''
"""


def add(session, channel: str, judge: str, score: int, top: int, version: str, at: datetime) -> None:
    pair = Pair(channel_id=channel, answer_ts=f"{at.timestamp():.6f}", status="judged", created_at=at)
    session.add(pair)
    session.flush()
    session.add(
        Judgment(pair_id=pair.id, judge=judge, status="ok", score=score, max_score=top, normalized_score=score / top,
                 model="m1", prompt_version=version, created_at=at)
    )  # fmt: skip


def test_the_digest_reads_a_team_judge_s_pass_rate_and_numbers_its_versions(db_url, tmp_path: Path, runtime_for):
    judges = tmp_path / "judges.d"
    judges.mkdir()
    (judges / "tone.toml").write_text(TONE)
    settings = make_settings(
        database_url=db_url, data_dir=tmp_path, judges_dir=judges, watched_channels=["C1", "C2"], timezone="UTC"
    )
    runtime = runtime_for(settings)
    tuesday = datetime(2026, 11, 24, 14, 30, tzinfo=UTC)
    with runtime.db.session() as session:
        add(session, "C1", "tone", 5, 5, "aaaa", NOW - timedelta(days=30))  # v1, long ago
        for i in range(12):  # last week: v2
            add(session, "C1", "tone", 4, 5, "bbbb", NOW - timedelta(days=9, minutes=i))
        for i in range(4):  # this week, Monday: still v2
            add(session, "C1", "tone", 4, 5, "bbbb", NOW - timedelta(days=3, minutes=i))
        for i in range(20):  # since Tuesday 14:30: v3, 15 pass (above 2), 5 fail
            add(session, "C1", "tone", 4 if i < 15 else 1, 5, "cccc", tuesday + timedelta(minutes=i))
        for i in range(11):
            add(session, "C2", "relevancy", 3, 4, "r1", NOW - timedelta(hours=i + 1))

    report = load_report(runtime, period_for(NOW, "UTC"))
    assert report.trust.version_numbers["tone"] == {"aaaa": 1, "bbbb": 2, "cccc": 3}
    text = digest_text(report, {}, {})
    assert (
        "Judge changed: tone v3 since Tue 14:30 (v2 before: this week's rate mixes them); last week's rate was v2: "
        "not compared"
    ) in text
    interval = wilson(19, 24)
    rate = f"79% passed ({interval.low * 100:.0f}–{interval.high * 100:.0f}%, n=24)"
    assert f"tone: {rate} · mean 3.38 / 5 (" in text  # the mean on its file's scale, 1..5
    assert "scores 1:5 · 2:0 · 3:0 · 4:19 · 5:0" in text
    c2 = text.split("== #C2 ==")[1]
    assert "relevancy" in c2 and "tone" not in c2

    default = runtime.rules.for_channel(None, settings)
    view = str(home_view(report, settings, default, {}, now=NOW)["blocks"])
    assert f"tone {rate}" in view and "Judge changed: tone v3 since Tue 14:30" in view
