"""`relmon judge` and `relmon eval` against the fake OpenAI server: the main paths as real subprocesses, the
many usage and error cases in process through `relmon.cli.main` (same code, without paying a Python start-up
per case), and the fake once as a process of its own steered over its admin endpoints."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from relmon.cli import main
from tests.fakes.openai_server import FakeOpenAI
from tests.services import free_port

ROOT = Path(__file__).resolve().parents[2]
RELMON = [sys.executable, "-m", "relmon.cli"]


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def fake(server: FakeOpenAI) -> FakeOpenAI:
    server.set_behavior()
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
        code = main(list(args))
        captured = capsys.readouterr()
        return Outcome(code, captured.out, captured.err)

    return run


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


def test_eval_reports_agreement_with_human_labels(fake: FakeOpenAI, cli, tmp_path: Path) -> None:
    labels = ROOT / "examples" / "labels.jsonl"
    result = relmon(
        "eval", str(labels), "--json", "--worst", "2", "--threads", "4", base_url=fake.base_url, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    # The fake grades 0 for "offtopic", 2 for "partial", 4 otherwise; against the file's human scores
    # [4, 1, 4, 3, 2, 0, 4, 2, 3, 1] that is judge [4, 4, 4, 4, 2, 0, 4, 2, 4, 0].
    assert report["items"] == report["n"] == 10 and report["errors"] == 0
    assert report["exact_agreement"] == pytest.approx(0.6)
    assert report["within_one_agreement"] == pytest.approx(0.9)
    assert report["confusion"]["matrix"][1] == [1, 0, 0, 0, 1]  # human 1: once judged 0, once judged 4
    assert sum(map(sum, report["confusion"]["matrix"])) == 10
    assert -1 <= report["kappa_quadratic"] <= 1 and -1 <= report["spearman"] <= 1
    assert [(w["line"], w["human"], w["judge"]) for w in report["worst"]] == [(2, 1, 4), (4, 3, 4)]
    assert len(fake.requests) == 10

    readable = cli("eval", str(labels), base_url=fake.base_url)
    assert readable.returncode == 0
    assert "Cohen's kappa (quadratic weights)" in readable.stdout and "worst disagreements" in readable.stdout


def grounded_eval(cli, fake: FakeOpenAI, tmp_path: Path) -> dict:
    """The `relmon eval -j grounded --json` report on five labels: three scored, one null on both sides (the human's
    and the judge's) and one that cannot be judged (its answer is empty)."""
    no_document = "No document seems to precisely answer your question."
    lines = [
        {"question": "Q1?", "answer": "A good answer.", "reference": "R1.", "score": 5},
        {"question": "Q2?", "answer": "offtopic talk", "reference": "R2.", "score": 2},
        {"question": "Q3?", "answer": no_document, "reference": "R3.", "human_score": None},
        {"question": "Q4?", "answer": "A partial answer.", "reference": "R4.", "human_score": 3},
        {"question": "Q5?", "answer": "", "reference": "R5.", "human_score": 1},
    ]
    path = tmp_path / "labels.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    result = cli("eval", str(path), "-j", "grounded", "--json", base_url=fake.base_url)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_eval_grounded_measures_agreement_on_scored_lines_only(fake: FakeOpenAI, cli, tmp_path: Path) -> None:
    report = grounded_eval(cli, fake, tmp_path)
    assert report["n"] == 3
    assert report["exact_agreement"] == pytest.approx(2 / 3)


def test_eval_grounded_counts_lines_null_on_both_sides(fake: FakeOpenAI, cli, tmp_path: Path) -> None:
    assert grounded_eval(cli, fake, tmp_path)["null"]["both"] == 1


def test_eval_grounded_reports_the_lines_it_could_not_judge(fake: FakeOpenAI, cli, tmp_path: Path) -> None:
    report = grounded_eval(cli, fake, tmp_path)
    assert report["errors"] == 1
    assert report["error_samples"][0]["line"] == 5


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"question": "Q?", "answer": "A."}\n', "needs the human score"),
        ('{"question": "Q?", "answer": "A.", "score": 7}\n', "not an integer on the relevancy scale 0–4"),
        ('{"question": "Q?", "answer": "A.", "score": 2}\nnot json\n', "labels.jsonl:2: not JSON"),
        ("", "has no labelled lines"),
    ],
)
def test_eval_rejects_malformed_labels(fake: FakeOpenAI, cli, tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text(content, encoding="utf-8")
    result = cli("eval", str(path), base_url=fake.base_url)
    assert result.returncode == 2
    assert message in result.stderr
    assert fake.requests == []


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


# relmon eval --from-feedback: people's votes on alerts, in a real database, as the labels ----------------------

# (judge, answer, the judge's stored score, votes) → the label the votes make (None: no label). The fake grades
# "offtopic" 0, "partial" 2 and anything else 4; the default alert threshold is 2.
VOTED = [
    ("relevancy", "offtopic: our office is open 9 to 5.", 0, ("right", "right"), 0),  # agreed: the judge's score
    ("relevancy", "offtopic: the cafeteria serves pasta.", 1, ("wrong",), 3),  # disagreed: just above the threshold
    ("relevancy", "partial: open Settings.", 2, ("right",), 2),
    ("relevancy", "Open Settings, then Security, then Reset.", 2, ("wrong", "wrong", "right"), 3),
    ("relevancy", "offtopic: a tie says nothing.", 1, ("right", "wrong"), None),
    ("relevancy", "offtopic: we moved offices.", 1, ("right",), 1),
    ("correctness", "offtopic: another judge's vote.", 0, ("right",), None),  # not a relevancy label
]


def voted_database(tmp_path: Path, voted=VOTED) -> str:
    """A migrated SQLite database holding captured answers, their judgments and people's votes on them."""
    from store.db import Database
    from store.feedback import record_vote
    from store.models import Judgment, Pair

    url = f"sqlite:///{tmp_path / 'votes.sqlite3'}"
    database = Database(url)
    database.migrate()
    with database.session() as session:
        for index, (judge, answer, score, votes, _label) in enumerate(voted):
            pair = Pair(channel_id="C_SUPPORT", answer_ts=f"1700000000.{index:06d}", status="judged",
                        question_text="How do I reset my password?", answer_text=answer)  # fmt: skip
            session.add(pair)
            session.flush()
            top = 4 if judge == "relevancy" else 2
            judgment = Judgment(pair_id=pair.id, judge=judge, status="ok", score=score, max_score=top,
                                normalized_score=score / top, model="judge-model")  # fmt: skip
            session.add(judgment)
            session.flush()
            for voter, vote in enumerate(votes):
                record_vote(session, judgment.id, f"U{voter}", vote)
    database.dispose()
    return url


def labels_file(tmp_path: Path, voted=VOTED) -> Path:
    """The same labels as the votes make, written as a labels file."""
    path = tmp_path / "from-votes.jsonl"
    rows = [
        {"question": "How do I reset my password?", "answer": answer, "human_score": label}
        for judge, answer, _score, _votes, label in voted
        if judge == "relevancy" and label is not None
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def without_lines(report: dict) -> dict:
    """The report but where each item is in its source (a file's line, a vote's rank among the voted answers)."""
    return {**report, "worst": [{k: v for k, v in item.items() if k != "line"} for item in report["worst"]]}


def test_eval_from_feedback_is_the_report_of_the_same_labels_in_a_file(fake: FakeOpenAI, cli, tmp_path: Path) -> None:
    database = voted_database(tmp_path)
    from_votes = cli("eval", "--from-feedback", "--json", "--worst", "5", base_url=fake.base_url,
                     DATABASE_URL=database)  # fmt: skip
    assert from_votes.returncode == 0, from_votes.stderr
    report = json.loads(from_votes.stdout)
    # labels [0, 3, 2, 3, 1] against the fake's [0, 0, 2, 4, 0]; the tie and the correctness vote are no labels
    assert report["judge"] == "relevancy" and report["items"] == report["n"] == 5 and report["errors"] == 0
    assert report["exact_agreement"] == pytest.approx(0.4)
    assert report["within_one_agreement"] == pytest.approx(0.8)
    assert [(w["human"], w["judge"]) for w in report["worst"]] == [(3, 0), (3, 4), (1, 0)]
    assert len(fake.requests) == 5

    from_file = cli("eval", str(labels_file(tmp_path)), "--json", "--worst", "5", base_url=fake.base_url)
    assert from_file.returncode == 0, from_file.stderr
    assert without_lines(json.loads(from_file.stdout)) == without_lines(report)

    readable = cli("eval", "--from-feedback", base_url=fake.base_url, DATABASE_URL=database)
    assert readable.returncode == 0 and "Cohen's kappa (quadratic weights)" in readable.stdout


def test_eval_from_feedback_without_votes_or_without_labels_exits_2(fake: FakeOpenAI, cli, tmp_path: Path) -> None:
    database = voted_database(tmp_path, voted=[row for row in VOTED if row[0] == "correctness" or row[4] is None])
    empty = cli("eval", "--from-feedback", base_url=fake.base_url, DATABASE_URL=database)
    assert empty.returncode == 2 and "no votes on relevancy alerts to use as labels yet" in empty.stderr
    nothing = cli("eval", base_url=fake.base_url, DATABASE_URL=database)
    assert nothing.returncode == 2 and "--from-feedback" in nothing.stderr
    assert fake.requests == []


def test_eval_from_feedback_as_a_process(fake: FakeOpenAI, tmp_path: Path) -> None:
    database = voted_database(tmp_path)
    result = relmon("eval", "--from-feedback", "--json", "--threads", "2", base_url=fake.base_url, cwd=tmp_path,
                    DATABASE_URL=database)  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["items"] == 5 and report["exact_agreement"] == pytest.approx(0.4)
    assert sum(map(sum, report["confusion"]["matrix"])) == 5
