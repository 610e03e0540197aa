"""`relmon judge` against the fake OpenAI server: the main paths as real subprocesses, the many usage and error
cases in process through `relmon.cli.main` (same code, without paying a Python start-up per case), and the fake
once as a process of its own steered over its admin endpoints. `relmon eval`: tests/system/test_eval_cli.py."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests import relmon_cli
from tests.fakes.openai_server import FakeOpenAI
from tests.relmon_cli import ROOT, Outcome, clean_env, relmon
from tests.services import free_port

# The fixtures of tests/relmon_cli.py, bound here: this module's `fake` is the fake OpenAI server, not the
# fake Slack of tests/conftest.py.
server, fake, cli = relmon_cli.server, relmon_cli.fake, relmon_cli.cli


def test_judge_prints_a_readable_verdict(fake: FakeOpenAI, tmp_path: Path) -> None:
    result = relmon(
        "judge", "-q", "How do I reset my password?", "-a", "Use Settings.", base_url=fake.base_url, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert "relevancy: 4 on 0–4 (normalized 1.00)" in result.stdout
    assert "model judge-model" in result.stdout and "tokens" in result.stdout and " ms" in result.stdout
    assert len(fake.requests) == 1


# A finished `relmon judge` process and the requests the fake received from it.
JudgedProcess = tuple[subprocess.CompletedProcess, list[dict]]


@pytest.fixture(scope="module")
def json_judge_run(server: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> JudgedProcess:
    """`relmon judge --json` with the answer on stdin and the reference in a file: one process for the tests that
    read it, as each process pays a Python start-up."""
    server.set_behavior()
    server.reset()
    folder = tmp_path_factory.mktemp("judge-json")
    (folder / "reference.txt").write_text("Settings > Security > Reset.", encoding="utf-8")
    result = relmon(
        "judge", "--judge", "correctness", "--question", "How do I reset my password?", "--answer", "-",
        "--reference-file", "reference.txt", "--json",
        base_url=server.base_url, cwd=folder, stdin="A partial answer read from stdin",
    )  # fmt: skip
    return result, server.requests


def test_judge_prints_a_json_verdict(json_judge_run: JudgedProcess) -> None:
    result, _requests = json_judge_run
    assert result.returncode == 0, result.stderr
    verdict = json.loads(result.stdout)
    assert verdict["judge"] == "correctness" and verdict["status"] == "ok" and verdict["score"] == 1
    assert verdict["max_score"] == 2 and verdict["normalized_score"] == 0.5


def test_judge_reads_the_answer_from_stdin(json_judge_run: JudgedProcess) -> None:
    result, requests = json_judge_run
    assert result.returncode == 0, result.stderr
    system, user = requests[0]["messages"]
    assert system["role"] == "system" and "A partial answer read from stdin" not in system["content"]
    assert "A partial answer read from stdin" in user["content"]


def test_judge_reads_the_reference_from_a_file(json_judge_run: JudgedProcess) -> None:
    result, requests = json_judge_run
    assert result.returncode == 0, result.stderr
    assert "Settings > Security > Reset." in requests[0]["messages"][1]["content"]


def test_judge_with_a_context_file(fake: FakeOpenAI, cli, tmp_path: Path) -> None:
    (tmp_path / "turns.txt").write_text(
        "customer: How do I export my data?\nbot: Use Settings > Export.\ncustomer: It is greyed out.\n"
        "bot: Ask an admin.\n",
        encoding="utf-8",
    )
    result = cli("judge", "-q", "And on Android?", "-a", "Tap Export.", "--context-file", "turns.txt",
                 base_url=fake.base_url, RELMON_CONTEXT_TURNS="2")  # fmt: skip
    assert result.returncode == 0, result.stderr
    user = fake.requests[0]["messages"][1]["content"]
    assert (
        "Earlier in this conversation:\n[customer] It is greyed out.\n[bot] Ask an admin.\n\nQuestion: And on Android?"
        in user
    )
    (tmp_path / "bad.jsonl").write_text('{"speaker": "judge", "text": "x"}\n', encoding="utf-8")
    bad = cli("judge", "-q", "q", "-a", "a", "--context-file", "bad.jsonl", base_url=fake.base_url)
    assert bad.returncode == 2 and "line 1" in bad.stderr


def test_judge_grounded_null_exits_zero(fake: FakeOpenAI, cli, tmp_path: Path) -> None:
    answer = "No document seems to precisely answer your question."
    result = cli("judge", "-j", "grounded", "-q", "Q?", "-a", answer, "-r", "R.", base_url=fake.base_url)
    assert result.returncode == 0, result.stderr
    assert "grounded: null" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["judge", "-q", "Q?"], "give the question and the answer"),
        (["judge", "-j", "correctness", "-q", "Q?", "-a", "A."], "give --reference"),
        (["judge", "-q", "-", "-a", "-"], "stdin is already read"),
        (["judge", "-q", "Q?", "--answer-file", "missing.txt"], "cannot read --answer-file"),
    ],
)
def test_judge_usage_errors_exit_2(fake: FakeOpenAI, cli, tmp_path: Path, args: list[str], message: str) -> None:
    result = cli(*args, base_url=fake.base_url, stdin="")
    assert result.returncode == 2
    assert message in result.stderr
    assert fake.requests == []


def test_judge_without_api_key_for_openai_exits_2(cli) -> None:
    result = cli("judge", "-q", "Q?", "-a", "A.", base_url=None, OPENAI_API_KEY="")
    assert result.returncode == 2
    assert "OPENAI_API_KEY is not set" in result.stderr


@pytest.fixture
def garbled_reply_verdict(fake: FakeOpenAI, cli) -> Outcome:
    """`relmon judge` when the judge's reply cannot be read."""
    fake.set_behavior(fault_rate=1.0, faults=["garbage"])
    return cli("judge", "-q", "Q?", "-a", "A.", base_url=fake.base_url)


def test_judge_error_verdict_exits_1(garbled_reply_verdict: Outcome) -> None:
    assert garbled_reply_verdict.returncode == 1
    assert "relevancy: error: cannot read the judge's reply" in garbled_reply_verdict.stdout


def test_judge_error_verdict_shows_the_raw_reply(garbled_reply_verdict: Outcome) -> None:
    assert "raw reply: <<<%%%" in garbled_reply_verdict.stdout


def test_judge_empty_answer_exits_1_without_a_call(fake: FakeOpenAI, cli, tmp_path: Path) -> None:
    result = cli("judge", "-q", "Q?", "-a", "  ", base_url=fake.base_url)
    assert result.returncode == 1
    assert "nothing to judge: the answer is empty" in result.stdout
    assert fake.requests == []


def test_judge_persistent_rate_limit_exits_1_after_the_sdk_retries(fake: FakeOpenAI, cli, tmp_path: Path) -> None:
    fake.set_behavior(fault_rate=1.0, faults=["429"], retry_after_seconds=0.01)
    result = cli("judge", "-q", "Q?", "-a", "A.", base_url=fake.base_url)
    assert result.returncode == 1
    assert "rate-limited" in result.stderr and "after 2 retries" in result.stderr
    assert len(fake.requests) == 3


def _post_json(url: str, payload: dict) -> dict:
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.load(response)


def test_fake_as_its_own_process_steered_over_http(cli, tmp_path: Path) -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.openai_server", "--port", str(port), "--latency-ms", "50"],
        cwd=ROOT, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert "listening" in process.stdout.readline()
        root = f"http://127.0.0.1:{port}"
        base_url = f"{root}/v1"
        assert relmon("judge", "-q", "Q?", "-a", "A.", base_url=base_url, cwd=tmp_path).returncode == 0
        _post_json(f"{root}/_admin/behavior", {"always_status": 401})
        denied = cli("judge", "-q", "Q?", "-a", "A.", base_url=base_url)
        assert denied.returncode == 1 and "check OPENAI_API_KEY" in denied.stdout
        with urllib.request.urlopen(f"{root}/_admin/stats", timeout=5) as response:
            stats = json.load(response)
        assert stats["requests"] == 2 and stats["statuses"] == {"200": 1, "401": 1}
    finally:
        process.terminate()
        process.wait(timeout=10)
