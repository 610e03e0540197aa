"""A new support lead's first value, through the real `relmon` CLI (in process) and a real database: an export of
five threads where a teammate answered after the bot, imported without Slack (no token, no RELMON_SUPPORT_TEAM:
the teammate is known by the threads they answered), then `relmon gaps`, `golden export`, `export`, `topics` and
`digest --dry-run` read what that history holds (the dry run groups the week's topics, none being stored yet). And
what the import says of itself: its own spend, what it left pending and why, and a corrupt day file named and
skipped (exit code 3), the rest imported."""

from __future__ import annotations

import io
import json
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests import relmon_cli
from tests.backfill_helpers import BOT, export_zip

server, fake, cli = relmon_cli.server, relmon_cli.fake, relmon_cli.cli

C = "C_SUPPORT"
ASKED = [
    ("How do I downgrade my plan?", "Go to Billing, Plans, and press Downgrade: it applies next cycle."),
    ("Why is my invoice in dollars?", "The currency follows the billing country; change it under Billing details."),
    ("Can I restore a deleted project?", "Within 30 days: Trash, select the project, Restore."),
    ("How do I turn on SSO for my team?", "SSO is on the Enterprise plan: Admin, Security, SAML, then upload the XML."),
    ("Where do I find my API usage?", "Developer settings, Usage: it shows calls per key per day."),
]


def five_threads(start: float) -> list[dict]:
    """Five threads: a question, the bot's unhelpful answer, and a teammate's answer (U_TEAM) after it."""
    messages = []
    for i, (question, teammate) in enumerate(ASKED):
        t = start + i * 3600
        root = {"type": "message", "ts": f"{t:.6f}", "user": "U_ASKER", "text": question,
                "thread_ts": f"{t:.6f}", "reply_count": 2}  # fmt: skip
        answer = {"type": "message", "ts": f"{t + 20:.6f}", "user": "U_SUPPORT", "bot_id": BOT,
                  "thread_ts": root["ts"], "text": "I am not sure. Please check the documentation."}  # fmt: skip
        reply = {"type": "message", "ts": f"{t + 200:.6f}", "user": "U_TEAM", "thread_ts": root["ts"],
                 "text": teammate}  # fmt: skip
        messages += [root, answer, reply]
    return messages


def environment(tmp_path: Path, base_url: str) -> dict[str, str]:
    return {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'relmon.sqlite3'}",
        "RELMON_MONITORED_BOTS": BOT,
        "RELMON_WATCHED_CHANNELS": C,
        "RELMON_DATA_DIR": str(tmp_path),
        "base_url": base_url,
    }


def write_export(tmp_path: Path, messages: list[dict], corrupt: str | None = None) -> Path:
    """The export; `corrupt`: a file of it (a day file, users.json, channels.json) cut short."""
    path = tmp_path / "export.zip"
    cut_short = '[{"type": "message", "ts": "17'
    with zipfile.ZipFile(path, "w") as archive:
        with zipfile.ZipFile(io.BytesIO(export_zip({C: ("support", messages)}))) as made:
            for name in made.namelist():
                archive.writestr(name, cut_short if name == corrupt else made.read(name))
        if corrupt and corrupt not in archive.namelist():
            archive.writestr(corrupt, cut_short)
    return path


def test_an_imported_history_teaches_gaps_golden_items_and_signals(cli, fake, tmp_path) -> None:
    start = (datetime.now(UTC) - timedelta(days=3)).timestamp()
    env = environment(tmp_path, fake.base_url)
    path = write_export(tmp_path, five_threads(start))
    done = cli("import", str(path), **env)
    assert done.returncode == 0, done.stderr
    assert (
        "5 with outcome signals, 5 not resolved, 5 answered by a teammate, 5 question(s) added to the golden set"
        in (done.stderr)
    )
    assert "relmon gaps --since" in done.stderr  # where to read what it holds

    gaps = cli("gaps", **env)
    assert gaps.returncode == 0, gaps.stderr
    assert "No knowledge gaps found" not in gaps.stdout
    for question, teammate in ASKED:
        assert f"## {question}" in gaps.stdout and teammate in gaps.stdout

    golden = cli("golden", "export", "--format", "jsonl", **env)
    assert golden.returncode == 0, golden.stderr
    items = [json.loads(line) for line in golden.stdout.splitlines() if line.strip()]
    assert len(items) == 5 and "5 item(s)" in golden.stderr

    exported = cli("export", **env)
    rows = [json.loads(line) for line in exported.stdout.splitlines() if line.strip()]
    assert rows and all("human_takeover" in row["signals"] for row in rows)

    topics = cli("topics", **env)
    assert topics.returncode == 0 and "too few to group" in topics.stdout

    digest = cli("digest", "--dry-run", **env)
    assert digest.returncode == 0, digest.stderr
    # Five closed outcome windows: counted, too few for rates (docs/statistics.md).
    assert "Outcomes: rates: too few (n=5)" in digest.stdout and "of 5 answers" in digest.stdout
    assert "Test set: 5 question(s)" in digest.stdout
    # Too few to group into topics: "What to fix first" says so and lists the failed questions, never empty; the
    # dry run stored today's topics run (none was stored since the import), so the next one reads it.
    fix_first = digest.stdout.split("== What to fix first ==\n", 1)[1]
    assert fix_first.startswith("5 questions in this period: too few to group into topics (needs 30); the 5 failed")
    assert all(question in fix_first for question, _teammate in ASKED)
    assert "today's topics run was stored: too few questions to group" in digest.stdout
    again = cli("digest", "--dry-run", **env)
    assert "too few to group into topics" in again.stdout and "nothing was posted or recorded" in again.stdout


def test_the_import_reports_its_own_spend_and_what_it_left_pending(cli, fake, tmp_path) -> None:
    start = (datetime.now(UTC) - timedelta(days=3)).timestamp()
    env = environment(tmp_path, fake.base_url)
    first = cli("import", str(write_export(tmp_path, five_threads(start))), **env)
    assert first.returncode == 0, first.stderr
    spent = float(first.stderr.split(" spent by this run")[0].rsplit("$", 1)[1])
    assert spent > 0
    # A second export, with one more thread, while the endpoint is down: nothing is judged, nothing is spent by it.
    fake.set_behavior(always_status=503)
    later = [{**m, "text": f"{m['text']} (again)"} for m in five_threads(start + 10 * 3600)[:3]]  # not cached
    second = cli("import", str(write_export(tmp_path, five_threads(start) + later)), **env, RELMON_LLM_MAX_RETRIES="0")
    assert second.returncode == 0, second.stderr
    assert "0 judged" in second.stderr and "$0.0000 spent by this run" in second.stderr
    assert "the LLM endpoint did not answer: 1 left pending; run again or leave it to the worker" in second.stderr
    # It answers again: the next run judges what was left, and only that is its spend.
    fake.set_behavior()
    third = cli("import", str(write_export(tmp_path, five_threads(start) + later)), **env)
    assert "1 judged" in third.stderr and "0 left pending" in third.stderr, third.stderr


def test_a_corrupt_day_file_is_named_and_skipped_and_the_rest_imported(cli, fake, tmp_path) -> None:
    start = (datetime.now(UTC) - timedelta(days=3)).timestamp()
    env = environment(tmp_path, fake.base_url)
    path = write_export(tmp_path, five_threads(start), corrupt="support/2020-01-01.json")
    done = cli("import", str(path), **env)
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    assert "skipped support/2020-01-01.json: not JSON" in done.stderr
    assert "1 file(s) of the export skipped, the rest imported (exit code 3)" in done.stderr
    assert "5 pairs found, 5 judged" in done.stderr


def test_a_corrupt_users_file_costs_only_the_names(cli, fake, tmp_path) -> None:
    start = (datetime.now(UTC) - timedelta(days=3)).timestamp()
    env = environment(tmp_path, fake.base_url)
    done = cli("import", str(write_export(tmp_path, five_threads(start), corrupt="users.json")), **env)
    assert done.returncode == 3 and "Traceback" not in done.stderr
    assert "skipped users.json: users.json in the export is not JSON" in done.stderr
    assert "people are named by their IDs" in done.stderr and "5 pairs found, 5 judged" in done.stderr


def test_an_export_without_a_readable_channel_list_imports_nothing_and_says_why(cli, fake, tmp_path) -> None:
    start = (datetime.now(UTC) - timedelta(days=3)).timestamp()
    env = environment(tmp_path, fake.base_url)
    done = cli("import", str(write_export(tmp_path, five_threads(start), corrupt="channels.json")), **env)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("relmon import: channels.json in the export is not JSON")


def test_without_slack_the_alert_channels_members_in_the_export_are_staff(cli, fake, tmp_path) -> None:
    """One thread only: the teammate has answered no other, but the export lists them in the alert channel."""
    start = (datetime.now(UTC) - timedelta(days=3)).timestamp()
    env = {**environment(tmp_path, fake.base_url), "RELMON_ALERT_CHANNEL": "C_ALERTS"}
    path = tmp_path / "export.zip"
    channels = {C: ("support", five_threads(start)[:3]), "C_ALERTS": ("alerts", [])}
    path.write_bytes(export_zip(channels, entries={"C_ALERTS": {"members": ["U_TEAM", "U_LEAD"]}}))
    done = cli("import", str(path), **env)
    assert done.returncode == 0, done.stderr
    assert "1 answered by a teammate, 1 question(s) added to the golden set" in done.stderr
    # Without that list, one thread is no evidence: nobody is known to be staff, as live.
    alone = tmp_path / "alone"
    alone.mkdir()
    path.write_bytes(export_zip({C: ("support", five_threads(start)[:3])}))
    done = cli("import", str(path), **{**environment(alone, fake.base_url), "RELMON_ALERT_CHANNEL": "C_ALERTS"})
    assert "0 answered by a teammate" in done.stderr, done.stderr


def test_entries_without_a_ts_are_left_out_and_named(cli, fake, tmp_path) -> None:
    start = (datetime.now(UTC) - timedelta(days=3)).timestamp()
    env = environment(tmp_path, fake.base_url)
    broken = [{"type": "message", "ts": "yesterday", "user": "U_ASKER", "text": "?"}, "not a message"]
    path = tmp_path / "export.zip"
    day = datetime.fromtimestamp(start, UTC).date().isoformat()
    made = zipfile.ZipFile(io.BytesIO(export_zip({C: ("support", five_threads(start))})))
    with zipfile.ZipFile(path, "w") as archive, made:
        for name in made.namelist():
            content = made.read(name)
            if name == f"support/{day}.json":
                content = json.dumps(json.loads(content) + broken).encode()
            archive.writestr(name, content)
    done = cli("import", str(path), **env)
    assert done.returncode == 3 and "Traceback" not in done.stderr
    assert f"skipped support/{day}.json: 2 entry(ies) without a message's ts left out" in done.stderr
    assert "5 pairs found, 5 judged" in done.stderr
