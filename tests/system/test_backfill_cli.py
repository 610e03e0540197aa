"""`relmon backfill` as a real process against the fakes: reads, judges, prints the report; a second run judges
nothing again."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.backfill_helpers import BOT, history_messages, load_fake
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack


def test_relmon_backfill_subprocess(tmp_path):
    with FakeSlack() as slack, FakeOpenAI() as llm:
        slack.add_channel("C_SUPPORT", "support")
        load_fake(slack, "C_SUPPORT", history_messages("C_SUPPORT", 12))
        env = {
            **os.environ, "SLACK_BOT_TOKEN": "xoxb-test", "SLACK_API_URL": slack.api_url,
            "OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "sk-test", "RELMON_MONITORED_BOTS": BOT,
            "RELMON_WATCHED_CHANNELS": "C_SUPPORT", "DATABASE_URL": f"sqlite:///{tmp_path / 'r.sqlite3'}",
            "RELMON_DATA_DIR": str(tmp_path), "RELMON_BACKFILL_CALLS_PER_MINUTE": "6000",
        }  # fmt: skip
        command = [sys.executable, "-m", "relmon.cli", "backfill", "--since", "2026-05-01"]
        first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert first.returncode == 0, first.stderr
        assert "12 pairs found, 12 judged" in first.stderr and "History report: " in first.stdout
        assert "#support" in first.stdout and "C_SUPPORT" not in first.stdout  # the name conversations.info gave
        second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert second.returncode == 0, second.stderr
        assert len(llm.requests) == 12
