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
        [sys.executable, "-m", "relmon.cli", "bot", "--port", "0"],
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


def test_invalid_settings_stop_every_command_with_the_variables_to_fix(tmp_path: Path) -> None:
    env = relmon_env(redis_url="redis://127.0.0.1:9/0", database_url=f"sqlite:///{tmp_path / 'db.sqlite3'}")
    env.update(RELMON_THRESHOLD="high", RELMON_DEGRADATION_MIN_ANSWERS="300", RELMON_VISIBILITY_TIMEOUT="5")
    for command in (["run", "--port", "0"], ["worker"], ["doctor"]):
        result = subprocess.run(
            [sys.executable, "-m", "relmon.cli", *command],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 2, result.stderr
        assert "Traceback" not in result.stderr
        assert "these settings are invalid" in result.stderr
        assert "RELMON_THRESHOLD: Input should be a valid integer" in result.stderr
        assert "RELMON_DEGRADATION_MIN_ANSWERS: Input should be less than or equal to 60" in result.stderr
        assert not (tmp_path / "db.sqlite3").exists()
    # The task lease has a floor (a worker renews it every sixth of it).
    env.update(RELMON_THRESHOLD="2", RELMON_DEGRADATION_MIN_ANSWERS="5")
    result = subprocess.run(
        [sys.executable, "-m", "relmon.cli", "worker"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "RELMON_VISIBILITY_TIMEOUT: Input should be greater than or equal to 10" in result.stderr


def test_worker_without_the_llm_or_the_slack_token_exits_at_once_listing_them(tmp_path: Path) -> None:
    env = relmon_env(redis_url="redis://127.0.0.1:9/0", database_url=f"sqlite:///{tmp_path / 'db.sqlite3'}")
    for name in ("OPENAI_API_KEY", "SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "RELMON_MONITORED_BOTS"):
        env.pop(name)
    env["OPENAI_API_KEY"] = ""  # as compose passes an empty line of .env
    result = subprocess.run(
        [sys.executable, "-m", "relmon.cli", "worker"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    listed = [line.split(":")[0].strip() for line in result.stderr.splitlines() if line.startswith("  ")]
    assert listed == ["SLACK_BOT_TOKEN", "OPENAI_API_KEY"]  # what the worker needs: not the events settings
    assert "these settings are missing" in result.stderr and "OPENAI_BASE_URL" in result.stderr  # where to get it
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "db.sqlite3").exists()  # nothing was started or created


def test_a_keyless_local_endpoint_needs_only_openai_base_url(tmp_path: Path, runtime_for) -> None:
    from judges import RelevancyJudge
    from store.settings import Settings
    from tests.fakes.openai_server import FakeOpenAI

    complete = {
        "slack_bot_token": "xoxb-1",
        "slack_signing_secret": "s",
        "monitored_bots": ["B1"],
        "alert_channel": "C1",
        "data_dir": tmp_path,
    }
    assert "OPENAI_API_KEY" in Settings(_env_file=None, **complete, openai_api_key="").missing()
    with FakeOpenAI() as fake:
        for key in (None, ""):  # unset, or set empty (compose's .env)
            settings = Settings(_env_file=None, **complete, openai_api_key=key, openai_base_url=fake.base_url)
            assert settings.missing() == [] and settings.missing_message(events=False) is None
            # The pipeline's client (common.runtime), built as a worker builds it: no key, a judgment all the same.
            verdict = RelevancyJudge().evaluate(
                runtime_for(settings).llm, "How do I reset my password?", "Open Settings > Security > Reset password."
            )
            assert verdict.status == "ok" and verdict.score == 4
