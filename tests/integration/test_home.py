"""App Home: the last 7 days per channel and the settings in effect, published with views.publish."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.listeners.home import publish_home
from common.membership import MembershipCache
from common.reports.intervals import bootstrap_mean
from common.runtime import Runtime, slack_client_for
from store.models import CanaryRun, Feedback, Judgment, Pair
from tests.builders import SECRET, make_settings
from tests.fakes.slack_server import FakeSlack


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        fake.add_channel("C2", "c2")  # named in the rules file
        yield fake


@pytest.fixture
def home_runtime(settings_for, slack: FakeSlack, tmp_path: Path, runtime_for) -> Callable[..., Runtime]:
    """`home_runtime(rules_yaml, **settings)`: the process runtime on the fake Slack with this rules file."""

    def build(rules_yaml: str, **extra: object) -> Runtime:
        rules = tmp_path / "rules.yml"
        rules.write_text(rules_yaml)
        # On the test's Redis: App Home asks Slack's channel info and the membership cache, kept in Redis.
        settings = settings_for(
            slack_api_url=slack.api_url,
            alert_channel="CALERTS",
            channel_rules_file=rules,
            data_dir=tmp_path / "data",
            **extra,
        )
        return runtime_for(settings)

    return build


@pytest.fixture
def runtime(home_runtime) -> Runtime:
    return home_runtime(
        "channels:\n  C2:\n    threshold: 3\n    sample_rate: 0.25\n",
        judge_model="judge-model-x",
        timezone="Europe/Paris",
    )


def add(
    runtime: Runtime, slack: FakeSlack, channel: str, scores: list[int | None], at: datetime, *, private: bool = False
) -> None:
    """Judged pairs of `channel`, a channel Slack knows (App Home asks Slack whether it is private)."""
    if channel not in slack.channels:
        slack.add_channel(channel, channel.lower(), is_private=private)
    with runtime.db.session() as session:
        for i, score in enumerate(scores):
            pair = Pair(
                channel_id=channel,
                answer_ts=f"{at.timestamp():.0f}.{i:06d}",
                status="judged",
                created_at=at,
                channel_is_private=private,
            )
            session.add(pair)
            session.flush()
            status = "error" if score is None else "ok"
            normalized = None if score is None else score / 4
            session.add(
                Judgment(
                    pair_id=pair.id,
                    judge="relevancy",
                    status=status,
                    score=score,
                    max_score=4,
                    normalized_score=normalized,
                )
            )


def publish_a_busy_week(runtime: Runtime, slack: FakeSlack) -> str:
    """App Home published for U123 over a week of C1 and C2 (and C1's older answers): the view's blocks as text."""
    now = datetime.now(UTC)
    add(runtime, slack, "C1", [4, 2, None], now - timedelta(days=1))
    add(runtime, slack, "C2", [3, 4] * 5, now - timedelta(days=2))
    add(runtime, slack, "C1", [0, 0, 0], now - timedelta(days=9))  # older than 7 days: not shown
    publish_home(runtime, slack_client_for(runtime.settings), MembershipCache(runtime.redis), "U123")
    return str(slack.published["U123"]["blocks"])


def test_home_shows_last_week_per_channel(runtime: Runtime, slack: FakeSlack) -> None:
    text = publish_a_busy_week(runtime, slack)
    (call,) = slack.calls_to("views.publish")
    assert call["user_id"] == "U123"
    view = slack.published["U123"]
    assert view["type"] == "home" and len(view["blocks"]) <= 100
    # C1's two scores are too few for a figure; C2's ten have their intervals and n.
    assert "*<#C1>*\\n2 judged of 3 · relevancy mean too few (n=2) · ≤ 2: too few (n=2) · 1 error" in text
    mean = bootstrap_mean({3: 5, 4: 5}).interval
    c2 = f"mean 3.50 / 4 ({mean.low:.2f}–{mean.high:.2f}, n=10) · 50% ≤ 3 (24–76%, n=10) · 0 errors"
    assert f"*<#C2>*\\n10 judged of 10 · relevancy {c2}" in text


def test_home_shows_the_settings_in_effect(runtime: Runtime, slack: FakeSlack) -> None:
    text = publish_a_busy_week(runtime, slack)
    assert "relevancy alert ≤ 3 · sampling 25%" in text  # C2's own rule
    assert "`judge-model-x`" in text and "relevancy ≤ 2" in text and "100% of answers" in text
    assert "10,000 judgments" in text and "Mondays 09:00 Europe/Paris to <#CALERTS>" in text


def test_home_stays_within_100_blocks_with_many_channels(runtime: Runtime, slack: FakeSlack) -> None:
    now = datetime.now(UTC)
    for i in range(80):
        add(runtime, slack, f"C{i:03d}", [i % 5], now - timedelta(hours=1))
    view = publish_home(runtime, slack_client_for(runtime.settings), MembershipCache(runtime.redis), "U1")
    assert len(view["blocks"]) <= 100
    assert "…and 21 more channels" in str(view["blocks"])  # 80 busy channels and C2 from the rules file
    assert slack.published["U1"]["blocks"] == view["blocks"]


def test_home_with_nothing_captured_yet(runtime: Runtime, slack: FakeSlack) -> None:
    view = publish_home(runtime, slack_client_for(runtime.settings), MembershipCache(runtime.redis), "U1")
    text = str(view["blocks"])
    assert "*All channels*\\n0 judged of 0 · 0 errors" in text
    assert "*<#C2>*\\n0 judged of 0" in text  # named in the rules file: shown even when quiet


def test_signed_app_home_opened_event_publishes_the_view(settings_for, slack: FakeSlack, tmp_path: Path) -> None:
    from tests.bot_harness import BotServer
    from tests.slack_requests import envelope, post

    settings = settings_for(slack_api_url=slack.api_url, data_dir=tmp_path / "data")
    with BotServer(settings) as bot:
        add(bot.runtime, slack, "C7", [1, 4], datetime.now(UTC) - timedelta(hours=2))
        messages_tab = {"type": "app_home_opened", "user": "U9", "channel": "D9", "tab": "messages", "event_ts": "1.1"}
        assert post(bot.url, envelope(messages_tab), SECRET).status_code == 200
        event = {"type": "app_home_opened", "user": "U9", "channel": "D9", "tab": "home", "event_ts": "1.2"}
        assert post(bot.url, envelope(event), SECRET).status_code == 200
        (call,) = slack.wait_for("views.publish", timeout=20)
    assert call["user_id"] == "U9"
    assert "*<#C7>*\\n2 judged of 2 · relevancy mean too few (n=2)" in str(slack.published["U9"]["blocks"])


def test_private_channels_figures_only_for_their_members(runtime: Runtime, slack: FakeSlack) -> None:
    """As `/judge stats`: a private channel's figures for its members only, left out of "All channels" too."""
    now = datetime.now(UTC)
    slack.add_channel("CHOME_PUB", "general")
    slack.add_channel("CHOME_PRIV", "secret-project", is_private=True, members=["U_IN"])
    slack.add_channel("CHOME_PRIV2", "hr", is_private=True, members=[])
    add(runtime, slack, "CHOME_PUB", [4], now - timedelta(days=1))
    add(runtime, slack, "CHOME_PRIV", [1, 1], now - timedelta(days=1), private=True)
    add(runtime, slack, "CHOME_PRIV2", [0], now - timedelta(days=2), private=True)
    client = slack_client_for(runtime.settings)
    membership = MembershipCache(runtime.redis)  # the app's one cache, shared by both views

    outsider = str(publish_home(runtime, client, membership, "U_OUT")["blocks"])
    assert "CHOME_PUB" in outsider and "CHOME_PRIV" not in outsider
    assert "*All channels you can see*\\n1 judged of 1" in outsider
    assert "2 private channels you are not in are not shown." in outsider

    member = str(publish_home(runtime, client, membership, "U_IN")["blocks"])
    assert "*<#CHOME_PRIV>*\\n2 judged of 2" in member and "CHOME_PRIV2" not in member
    assert "*All channels you can see*\\n3 judged of 3" in member
    assert "1 private channel you are not in is not shown." in member
    # Membership is asked for private channels only, at most once each (then the cache's few seconds).
    asked = [call["channel"] for call in slack.calls_to("conversations.members")]
    assert set(asked) <= {"CHOME_PRIV", "CHOME_PRIV2"} and len(asked) == len(set(asked))


def add_scored(
    runtime: Runtime,
    channel: str,
    score: int,
    at: datetime,
    *,
    votes: tuple[str, ...] = (),
    model: str = "m1",
    second: tuple[str, float] | None = None,
    private: bool = False,
) -> None:
    """One captured answer's relevancy judgment with people's votes and, maybe, a second opinion."""
    with runtime.db.session() as session:
        pair = Pair(
            channel_id=channel,
            answer_ts=f"{at.timestamp():.6f}",
            status="judged",
            created_at=at,
            channel_is_private=private,
        )
        session.add(pair)
        session.flush()
        judgment = Judgment(
            pair_id=pair.id,
            judge="relevancy",
            status="ok",
            score=score,
            max_score=4,
            normalized_score=score / 4,
            model=model,
            prompt_version="p1",
            created_at=at,
            confirmation_status=second[0] if second else None,
            confirmation_score=second[1] if second else None,
        )
        session.add(judgment)
        session.flush()
        session.add_all(Feedback(judgment_id=judgment.id, user_id=f"U{i}", vote=v) for i, v in enumerate(votes))


def test_home_shows_whether_the_alerts_can_be_trusted(runtime: Runtime, slack: FakeSlack) -> None:
    """The trust lines in the published view: precision with its counts and interval, disputed low scores with
    both scores, the canary's kappa and its change with "the judge moved", the like-with-like notice; a private
    channel's dispute only for its members."""
    now = datetime.now(UTC)
    slack.add_channel("CTRUST", "support")
    slack.add_channel("CTRUST_PRIV", "secret", is_private=True, members=["U_IN"])
    for i in range(8):
        add_scored(runtime, "CTRUST", 1, now - timedelta(hours=i + 1), votes=("right",) if i < 6 else ("wrong",))
    add_scored(runtime, "CTRUST", 1, now - timedelta(hours=10), second=("disputed", 4))
    add_scored(runtime, "CTRUST_PRIV", 0, now - timedelta(hours=11), second=("disputed", 3), private=True)
    add_scored(runtime, "CTRUST", 4, now - timedelta(days=9), model="m0")  # last week's judge answered as m0
    with runtime.db.session() as session:
        for days, kappa, moved in ((8, 0.8, None), (0, 0.55, "kappa fell from 0.80 to 0.55")):
            at = now - timedelta(days=days, minutes=5)
            session.add(CanaryRun(judge="relevancy", model="m1", kappa=kappa, exact_agreement=0.6, moved=moved,
                                  created_at=at))  # fmt: skip
    client = slack_client_for(runtime.settings)
    membership = MembershipCache(runtime.redis)

    view = publish_home(runtime, client, membership, "U_OUT")
    assert slack.published["U_OUT"]["blocks"] == view["blocks"]
    [trust] = [b["text"]["text"] for b in view["blocks"] if "Can the alerts be trusted?" in str(b)]
    assert "Alert precision, relevancy: 6 of 8 voted alerts agreed with (too few for a rate)" in trust
    assert "Second opinions: 1 low score disputed (1 → 4) · 0 confirmed" in trust
    assert "Canary (relevancy, model `m1`): κ 0.55 (−0.25), exact agreement 60%" in trust
    assert ":warning: the judge moved: kappa fell from 0.80 to 0.55" in trust
    assert "Judge changed: relevancy: model `m1` this week; last week's figures were `m0`: not compared" in trust
    assert "*<#CTRUST>*" in str(view["blocks"]) and "relevancy alerts: 6 of 8 voted alerts agreed with" in str(
        view["blocks"]
    )

    member = str(publish_home(runtime, client, membership, "U_IN")["blocks"])
    assert "2 low scores disputed (1 → 4, 0 → 3)" in member


def test_home_shows_the_rules_files_defaults_over_the_environment(home_runtime, slack: FakeSlack) -> None:
    slack.add_channel("C5", "c5")
    runtime = home_runtime(
        "defaults:\n  alert_cap_per_hour: 3\nchannels:\n  C5:\n    alert_cap_per_hour: 7\n", alert_cap_per_hour=20
    )
    view = publish_home(runtime, slack_client_for(runtime.settings), MembershipCache(runtime.redis), "U1")
    text = str(view["blocks"])
    assert "<#CALERTS>, at most 3 an hour" in text and "at most 20" not in text
    assert "at most 7 alerts an hour" in text  # C5's own cap


def dry_run_digest(database: Path, data_dir: Path) -> int:
    """`relmon digest --dry-run` on the SQLite file `database`: its exit code. The dry run touches no database: on a
    schema not at head it says so and exits 1."""
    from argparse import Namespace

    from relmon.digest_cli import run_digest

    settings = make_settings(database_url=f"sqlite:///{database}", data_dir=data_dir)
    return run_digest(Namespace(dry_run=True, force=False), settings)


def test_digest_dry_run_does_not_create_a_missing_database(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "missing.sqlite3"
    assert dry_run_digest(missing, tmp_path / "data") == 1
    assert not missing.exists()  # not even created
    assert capsys.readouterr().err.strip().endswith("run relmon migrate first")


def test_digest_dry_run_does_not_migrate_an_empty_database(tmp_path: Path, capsys) -> None:
    from sqlalchemy import create_engine, inspect

    empty = tmp_path / "empty.sqlite3"
    create_engine(f"sqlite:///{empty}").connect().close()
    assert dry_run_digest(empty, tmp_path / "data") == 1
    assert inspect(create_engine(f"sqlite:///{empty}")).get_table_names() == []  # not migrated
    assert "run relmon migrate first" in capsys.readouterr().err


def test_whether_a_channel_is_private_comes_from_slack_not_from_its_pairs(runtime: Runtime, slack: FakeSlack) -> None:
    """A channel made private since its pairs were captured (or whose pairs were never flagged) is private; a
    channel Slack does not know (relmon removed, channel deleted) is treated as private: its members only."""
    now = datetime.now(UTC)
    slack.add_channel("CHOME_NOW_PRIV", "went-private", is_private=True, members=["U_IN"])
    add(runtime, slack, "CHOME_NOW_PRIV", [1], now - timedelta(days=1), private=False)
    slack.add_channel("CHOME_PUBLIC", "public")
    add(runtime, slack, "CHOME_PUBLIC", [3], now - timedelta(days=1), private=True)  # flagged, but public in Slack
    add(runtime, slack, "CHOME_GONE", [2], now - timedelta(days=1))
    slack.channels.pop("CHOME_GONE")
    client = slack_client_for(runtime.settings)
    outsider = str(publish_home(runtime, client, MembershipCache(runtime.redis), "U_OUT")["blocks"])
    assert "CHOME_PUBLIC" in outsider and "CHOME_NOW_PRIV" not in outsider and "CHOME_GONE" not in outsider
    member = str(publish_home(runtime, client, MembershipCache(runtime.redis), "U_IN")["blocks"])
    assert "*<#CHOME_NOW_PRIV>*" in member and "CHOME_GONE" not in member


def test_a_bots_exchanges_are_a_block_of_figures_in_everyones_home(runtime: Runtime, slack: FakeSlack) -> None:
    """Exchanges sent to the ingest API in no channel: the bot's block (figures, to anyone: no channel to be a
    member of), counted in "All channels"; none of a dm's words, nor a Slack look-up for the bot's key."""
    from tests.integration.test_ingest_reports import DM_ANSWER, DM_QUESTION, add_exchange

    now = datetime.now(UTC)
    slack.add_channel("CHOME_PUB", "general")
    add(runtime, slack, "CHOME_PUB", [4], now - timedelta(days=1))
    for n, score in enumerate((0, 4)):
        add_exchange(runtime, now, n, visibility="dm", score=score)
    view = str(publish_home(runtime, slack_client_for(runtime.settings), MembershipCache(runtime.redis), "U_OUT"))
    assert "*helpdesk (bot conversations)*\\n2 judged of 2 · relevancy mean too few (n=2)" in view
    assert "*All channels*\\n3 judged of 3" in view  # no private channel is hidden from this person
    assert DM_QUESTION not in view and DM_ANSWER not in view
    assert not [c for c in slack.calls_to("conversations.info") + slack.calls_to("conversations.members")
                if "bot:" in str(c)]  # fmt: skip
