"""`relmon bot` refuses to start without its settings, and says exactly what to set and where to get it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.processes import relmon_env


def test_bot_without_slack_settings_exits_at_once_listing_them(tmp_path: Path) -> None:
    env = relmon_env(redis_url="redis://127.0.0.1:9/0", database_url=f"sqlite:///{tmp_path / 'db.sqlite3'}")
    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "RELMON_MONITORED_BOTS"):
        env.pop(name)
    result = subprocess.run(
        [sys.executable, "-m", "bot.cli", "bot", "--port", "0"],
        env=env,
        cwd=tmp_path,  # no .env file here
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "SLACK_BOT_TOKEN" in result.stderr and "OAuth & Permissions" in result.stderr
    assert "SLACK_SIGNING_SECRET" in result.stderr and "RELMON_MONITORED_BOTS" in result.stderr
    assert "RELMON_ALERT_CHANNEL" not in result.stderr  # it is set: only what is missing is listed
    assert not (tmp_path / "db.sqlite3").exists()  # nothing was started or created
