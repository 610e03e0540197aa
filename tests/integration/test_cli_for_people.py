"""What a support lead reads from the `relmon` command (in process through `relmon.cli.main`, a real SQLite
database, the fake LLM and the fake Slack): channels by name (`#support`, from the export's channels.json or Slack's
conversations.info, stored for every later command), answers by the team's local time (RELMON_TIMEZONE=Europe/Paris,
not a raw ts), a history's report titled as such, each channel's block once; and `--json` keeping the IDs and
the raw ts, with the name and local time as extra fields."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from store import channel_names
from store.db import Database
from tests import relmon_cli
from tests.backfill_helpers import BOT, export_zip, history_messages, load_fake
from tests.integration.test_import_teaches import ASKED, five_threads

server, fake, cli = relmon_cli.server, relmon_cli.fake, relmon_cli.cli

C, OTHER = "C0SUPPORT1", "C0BILLING2"
PARIS = ZoneInfo("Europe/Paris")


def environment(tmp_path: Path, base_url: str, channels: str = C, **extra: str) -> dict[str, str]:
    return {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'relmon.sqlite3'}",
        "RELMON_MONITORED_BOTS": BOT,
        "RELMON_WATCHED_CHANNELS": channels,
        "RELMON_DATA_DIR": str(tmp_path),
        "RELMON_TIMEZONE": "Europe/Paris",
        "base_url": base_url,
        **extra,
    }


def paris(ts: float) -> str:
    """How a person in Paris reads a moment: `Fri 4 Dec 12:06`."""
    local = datetime.fromtimestamp(ts, PARIS)
    return f"{local:%a} {local.day} {local:%b %H:%M}"


def answer_times(start: float) -> list[float]:
    """The bot's answers' ts in `five_threads(start)`."""
    return [start + i * 3600 + 20 for i in range(len(ASKED))]


def write(tmp_path: Path, channels: dict[str, tuple[str, list[dict]]]) -> Path:
    path = tmp_path / "export.zip"
    path.write_bytes(export_zip(channels))
    return path


def headings(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("== ")]


def test_the_import_report_names_its_channel_in_local_time_under_a_title_of_its_own(cli, fake, tmp_path) -> None:
    start = (datetime.now(UTC) - timedelta(days=3)).timestamp()
    env = environment(tmp_path, fake.base_url)
    done = cli("import", str(write(tmp_path, {C: ("support", five_threads(start))})), **env)
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    since = datetime.fromtimestamp(start, PARIS).date().isoformat()
    today = datetime.now(PARIS).date().isoformat()
    assert first == f"History report: {since} – {today}, imported from export.zip"
    assert "Weekly digest" not in done.stdout and "the last 7 days" not in done.stdout
    assert "#support" in done.stdout and C not in done.stdout  # the name, never the ID
    assert "ts 1" not in done.stdout
    # Each worst answer at its own local time: Paris is an hour ahead of UTC in December.
    answered = {question: t for (question, _), t in zip(ASKED, answer_times(start), strict=True)}
    lines = done.stdout.splitlines()
    worst = [(line, lines[i + 1].removeprefix("    Q: ")) for i, line in enumerate(lines) if line.startswith("- ")]
    assert len(worst) == 3
    for line, question in worst:
        moment = answered[question]
        utc = datetime.fromtimestamp(moment, UTC)
        assert line.endswith(f"in #support ({paris(moment)})") and f"{utc:%H:%M}" not in line, line
    # Its progress and summary say which command ran.
    assert "relmon import: 15 messages read" in done.stderr and "relmon backfill" not in done.stderr


def test_a_reports_only_channel_prints_its_block_once(cli, fake, tmp_path) -> None:
    """The report's summary of all channels and its one channel's block were the same figures printed twice."""
    start = (datetime.now(UTC) - timedelta(days=3)).timestamp()
    env = environment(tmp_path, fake.base_url)
    done = cli("import", str(write(tmp_path, {C: ("support", five_threads(start))})), **env)
    assert done.returncode == 0, done.stderr
    assert headings(done.stdout) == ["== All channels: #support only =="]
    assert done.stdout.count("Answers: 5 seen · 5 judged") == 1
    assert done.stdout.count("Q: Where do I find my API usage?") == 1

    digest = cli("digest", "--dry-run", **env)
    assert digest.returncode == 0, digest.stderr
    assert digest.stdout.count("Answers: 5 seen · 5 judged") == 1
    assert "== All channels: #support only ==" in digest.stdout


def test_two_channels_each_get_one_block_by_name(cli, fake, tmp_path) -> None:
    start = (datetime.now(UTC) - timedelta(days=3)).timestamp()
    env = environment(tmp_path, fake.base_url, channels=f"{C},{OTHER}")
    billing = history_messages(OTHER, 2, start=start + 30)
    path = write(tmp_path, {C: ("support", five_threads(start)), OTHER: ("billing", billing)})
    done = cli("import", str(path), **env)
    assert done.returncode == 0, done.stderr
    trust = "== Can the alerts be trusted? =="  # the closed conversations label the judge's verdicts: its agreement
    assert headings(done.stdout) == ["== All channels ==", trust, "== #billing ==", "== #support =="]
    assert done.stdout.count("Answers: 5 seen") == 1 and done.stdout.count("Answers: 2 seen") == 1
    assert C not in done.stdout and OTHER not in done.stdout


def test_every_later_command_names_the_imported_channel_and_json_keeps_the_ids(cli, fake, tmp_path) -> None:
    start = (datetime.now(UTC) - timedelta(days=3)).timestamp()
    env = environment(tmp_path, fake.base_url)
    assert cli("import", str(write(tmp_path, {C: ("support", five_threads(start))})), **env).returncode == 0

    listed = cli("golden", "list", **env)
    assert listed.returncode == 0, listed.stderr
    assert "#support" in listed.stdout and C not in listed.stdout

    digest = cli("digest", "--dry-run", **env)
    assert digest.returncode == 0, digest.stderr
    assert digest.stdout.startswith("Weekly digest · ")  # the week's digest is still the weekly digest
    assert "#support" in digest.stdout and C not in digest.stdout and "ts 1" not in digest.stdout
    assert any(paris(t) in digest.stdout for t in answer_times(start))

    gaps = cli("gaps", "--format", "json", **env)
    assert gaps.returncode == 0, gaps.stderr
    rows = json.loads(gaps.stdout)["gaps"]
    questions = {q: start + i * 3600 for i, (q, _) in enumerate(ASKED)}
    assert len(rows) == len(ASKED)
    for row in rows:
        asked = questions[row["question"]]
        assert row["channel"] == C and row["ts"] == f"{asked:.6f}"  # what scripts read, unchanged
        assert row["channel_name"] == "support"
        assert row["time"] == datetime.fromtimestamp(asked, PARIS).isoformat(timespec="seconds")
        assert row["time"].endswith("+01:00")

    markdown = cli("gaps", **env)
    assert markdown.returncode == 0 and C not in markdown.stdout


def test_the_import_dry_run_names_its_examples_by_channel_and_local_time(cli, fake, tmp_path) -> None:
    start = (datetime.now(UTC) - timedelta(days=3)).timestamp()
    env = environment(tmp_path, fake.base_url)
    done = cli("import", "--dry-run", str(write(tmp_path, {C: ("support", five_threads(start))})), **env)
    assert done.returncode == 0, done.stderr
    examples = [line for line in done.stdout.splitlines() if line.startswith("  ")]
    assert examples and all(line.startswith("  #support ") for line in examples)
    assert {line.split(": ")[0].removeprefix("  #support ") for line in examples} <= {
        paris(t) for t in answer_times(start)
    }
    assert C not in done.stdout


def test_backfill_learns_names_from_slack_and_commands_without_a_token_keep_them(cli, fake, slack, tmp_path) -> None:
    """`relmon backfill` asks Slack's conversations.info; the name is stored, so `golden list` and `digest
    --dry-run` (no Slack) show it too. A channel no source names is shown by its ID."""
    start = (datetime.now(UTC) - timedelta(days=3)).timestamp()
    slack.add_channel(C, "support", members=["U_RELMON"])
    load_fake(slack, C, five_threads(start))
    env = environment(tmp_path, fake.base_url, SLACK_BOT_TOKEN="xoxb-test", SLACK_API_URL=slack.api_url)
    done = cli("backfill", "--since", "7d", **env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].endswith(", read from Slack's history")
    assert done.stdout.startswith("History report: ")
    assert "#support" in done.stdout and C not in done.stdout
    assert "relmon backfill: " in done.stderr and "relmon import" not in done.stderr

    without_slack = {k: v for k, v in env.items() if not k.startswith("SLACK_")}
    listed = cli("golden", "list", **without_slack)
    assert "#support" in listed.stdout and C not in listed.stdout
    digest = cli("digest", "--dry-run", **without_slack)
    assert "#support" in digest.stdout and C not in digest.stdout

    # A channel Slack does not know (gone, or relmon not in it) keeps its ID.
    unknown = "C0GONE0003"
    load_fake(slack, unknown, history_messages(unknown, 2, start=start))
    env_gone = {**env, "RELMON_WATCHED_CHANNELS": unknown}
    again = cli("backfill", "--since", "7d", "--dry-run", **env_gone)
    assert again.returncode == 0, again.stderr
    assert f"  #{unknown} " in again.stdout


def test_the_backfill_dry_run_names_its_examples_and_stores_no_name(cli, fake, slack, tmp_path) -> None:
    start = (datetime.now(UTC) - timedelta(days=3)).timestamp()
    slack.add_channel(C, "support", members=["U_RELMON"])
    load_fake(slack, C, five_threads(start))
    env = environment(tmp_path, fake.base_url, SLACK_BOT_TOKEN="xoxb-test", SLACK_API_URL=slack.api_url)
    done = cli("backfill", "--since", "7d", "--dry-run", **env)
    assert done.returncode == 0, done.stderr
    examples = [line for line in done.stdout.splitlines() if line.startswith("  ")]
    assert len(examples) == len(ASKED) and all(line.startswith("  #support ") for line in examples)
    assert {line.split(": ")[0].removeprefix("  #support ") for line in examples} == {
        paris(t) for t in answer_times(start)
    }
    assert "(dry run: nothing was judged, stored or posted)" in done.stdout
    database = Database(env["DATABASE_URL"])
    try:
        with database.reading() as session:
            assert channel_names.known(session) == {}
    finally:
        database.dispose()
