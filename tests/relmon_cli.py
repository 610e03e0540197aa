"""Running the `relmon` command in the CLI tests, against a FakeOpenAI (`server`, started once per module, and
`fake`, reset for each test): as a real subprocess (`relmon`), or in process through `relmon.cli.main` (the `cli`
fixture: same code, without paying a Python start-up per case). A test module binds the fixtures as its own
(`server, fake, cli = relmon_cli.server, relmon_cli.fake, relmon_cli.cli`), over the fake Slack `fake` of
tests/conftest.py."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from relmon.cli import main
from tests.fakes.openai_server import FakeOpenAI

ROOT = Path(__file__).resolve().parents[1]
RELMON = [sys.executable, "-m", "relmon.cli"]


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def fake(server: FakeOpenAI) -> FakeOpenAI:
    """The module's fake OpenAI server, its default behaviour and reply back and its counters cleared."""
    server.set_behavior()
    server.set_reply(None)
    server.reset()
    return server


def clean_env(**extra: str) -> dict[str, str]:
    """The parent environment without any LLM or relmon settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RELMON_"))}
    env["PYTHONPATH"] = str(ROOT)
    return {**env, **extra}


def relmon(*args: str, base_url: str | None, cwd: Path, stdin: str | None = None, **env: str):
    extra = {"OPENAI_API_KEY": "sk-test", "RELMON_JUDGE_MODEL": "judge-model", **env}
    if base_url:
        extra["OPENAI_BASE_URL"] = base_url
    return subprocess.run(
        [*RELMON, *args], env=clean_env(**extra), cwd=cwd, input=stdin, capture_output=True, text=True, timeout=60
    )


@dataclass
class Outcome:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, tmp_path: Path):
    """Run `relmon ARGS` in this process with a clean LLM environment, in an empty folder (no .env)."""

    def run(*args: str, base_url: str | None, stdin: str = "", **env: str) -> Outcome:
        for name in list(os.environ):
            if name.startswith(("OPENAI_", "RELMON_")):
                monkeypatch.delenv(name)
        settings = {"OPENAI_API_KEY": "sk-test", "RELMON_JUDGE_MODEL": "judge-model", **env}
        if base_url:
            settings["OPENAI_BASE_URL"] = base_url
        for name, value in settings.items():
            monkeypatch.setenv(name, value)
        monkeypatch.chdir(tmp_path)
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        capsys.readouterr()
        # A handler an earlier in-process command left on a stream pytest has closed since (its capture) would turn
        # this run's log lines into "--- Logging error ---" tracebacks on stderr.
        for handler in list(logging.root.handlers):
            if getattr(getattr(handler, "stream", None), "closed", False):
                logging.root.removeHandler(handler)
        code = main(list(args))
        captured = capsys.readouterr()
        return Outcome(code, captured.out, captured.err)

    return run
