"""The operator's outputs through the `relmon` command itself (in process through `relmon.cli.main`, and as a
process where the terminal matters), on a real database and the fake LLM over HTTP:

- `relmon regress`, `relmon golden list` and `relmon gaps` leave private channels', DMs' and Slack Connect
  channels' texts out unless `--include-private`, and say how many they withheld, in every format;
- hostile questions (terminal escapes, rich markup, `]]>`, U+FFFF, C1 controls) leave the JUnit XML well-formed,
  the JSON intact and the terminal text plain;
- regress writes its report files before anything that can fail afterwards (here: a standard output that is gone).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from sqlalchemy import select

from store import golden
from store.db import Database
from store.golden_models import RegressRun
from store.golden_rules import ORIGIN_TAKEOVER, Occurrence
from tests import relmon_cli
from tests.fakes.openai_server import FakeOpenAI
from tests.topics_corpus import FAILING_TOPIC, corpus, corpus_questions, store_questions

cli = relmon_cli.cli

# Rich markup that would be obeyed (a link, a closing tag with nothing to close: a MarkupError), and CDATA's end.
MARKUP = "[/] [link=https://evil.example]pay[/link] ]]> <&"
# A screen wipe, a colour, a bell, a one-character CSI (C1), noncharacters XML 1.0 forbids, a bidi override, DEL.
CONTROL = "Bill\x1b[2J\x1b[31m red\x07 \x9b6n \uffff\ufffe \u202eok\x7f\x01?"
RAW = ("\x1b", "\x07", "\x9b", "\uffff", "\ufffe", "\u202e", "\x7f", "\x01")  # none may reach a terminal or the XML
PRIVATE_QUESTIONS = {
    "G1": "Where is the VPN guide PRIVMARK-GROUP?",  # a private channel
    "D1": "Can you reset my salary slip PRIVMARK-DM?",  # a DM (capture stores it as private)
    "C9SHARED": "Our partner contract PRIVMARK-CONNECT?",  # Slack Connect: stored as private, ext-shared
}
NOTE = "3 private items withheld; --include-private to show them"


@pytest.fixture
def golden_set(database: Database, db_url: str, cli, tmp_path: Path) -> dict[str, int]:
    """Two hostile public questions imported through `relmon golden import`, and three private ones captured."""
    imported = tmp_path / "set.jsonl"
    rows = [{"question": MARKUP, "expected": "Settings > Billing."}, {"question": CONTROL, "expected": "Refunded."}]
    imported.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    assert cli("golden", "import", str(imported), base_url=None, DATABASE_URL=db_url).returncode == 0
    with database.session() as session:
        for n, (channel, question) in enumerate(PRIVATE_QUESTIONS.items(), start=1):
            occurrence = Occurrence(channel, f"{n}.0", f"{n}.1", f"{n}.2", question, None, "offtopic",
                                    "PRIVMARK-EXPECTED answer.", None, True, ORIGIN_TAKEOVER, pair_id=n)  # fmt: skip
            golden.add_occurrence(session, occurrence)
        ids = {item.question: item.id for item in golden.active_items(session)}
    return ids


def candidates_file(tmp_path: Path, ids: dict[str, int]) -> Path:
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps({"id": i, "answer": "Settings > Billing. (v2)"}) + "\n" for i in ids.values()))
    return path


@dataclasses.dataclass
class RegressOutputs:
    code: int
    stdout: str
    stderr: str
    report_text: str
    junit_bytes: bytes

    @property
    def report(self) -> dict:
        return json.loads(self.report_text)

    @property
    def junit(self) -> ET.Element:
        return ET.fromstring(self.junit_bytes)  # well-formed, or this raises


def regress(cli, db_url: str, tmp_path: Path, ids: dict[str, int], *extra: str) -> RegressOutputs:
    report, junit = tmp_path / "report.json", tmp_path / "report.xml"
    with FakeOpenAI() as fake:
        outcome = cli("regress", str(candidates_file(tmp_path, ids)), "--json", str(report), "--junit", str(junit),
                      "--min-pass", "0", "--baseline", "none", *extra, base_url=fake.base_url, DATABASE_URL=db_url,
                      COLUMNS="300")  # fmt: skip
    return RegressOutputs(
        outcome.returncode, outcome.stdout, outcome.stderr, report.read_text("utf-8"), junit.read_bytes()
    )


def test_regress_withholds_private_items_text_in_every_format(golden_set, database, db_url, cli, tmp_path) -> None:
    run = regress(cli, db_url, tmp_path, golden_set)
    assert run.code == 0, run.stderr
    for output in (run.stdout, run.stderr, run.report_text, run.junit_bytes.decode("utf-8")):
        assert "PRIVMARK" not in output
    report = run.report
    assert report["private_withheld"] == 3 and report["note"] == NOTE and report["summary"]["items"] == 5
    withheld = [item for item in report["items"] if item["withheld"]]
    assert len(withheld) == 3 and all(item["question"] is None and item["outcome"] for item in withheld)
    suite = run.junit
    assert suite.find("properties/property[@name='private_withheld']").get("value") == "3"
    assert suite.find("system-out").text == NOTE and len(suite.findall("testcase")) == 5
    assert sum("(private channel: withheld)" in case.get("name") for case in suite.iter("testcase")) == 3
    assert NOTE in run.stdout
    with database.reading() as session:  # the baseline kept in the database holds no private text either
        stored = session.execute(select(RegressRun.report)).scalars().all()
    assert stored and "PRIVMARK" not in json.dumps(stored)


def test_regress_shows_private_items_when_asked(golden_set, db_url, cli, tmp_path) -> None:
    run = regress(cli, db_url, tmp_path, golden_set, "--include-private")
    questions = {item["question"] for item in run.report["items"]}
    assert set(PRIVATE_QUESTIONS.values()) <= questions and run.report["private_withheld"] == 0
    assert all("PRIVMARK" in text for text in (run.stdout, run.report_text, run.junit_bytes.decode()))
    assert "withheld" not in run.stdout and run.junit.find("system-out") is None


def test_regress_hostile_questions_keep_every_format_intact(golden_set, db_url, cli, tmp_path) -> None:
    run = regress(cli, db_url, tmp_path, golden_set)
    assert run.code == 0, run.stderr
    # JSON: the very same strings back, and no raw control character in the file (a `cat` shows it safely).
    assert {MARKUP, CONTROL} <= {item["question"] for item in run.report["items"]}
    assert not any(char in run.report_text for char in RAW)
    # JUnit: parses (above), holds only characters XML 1.0 allows, and says what was typed, visibly.
    names = [case.get("name") for case in run.junit.iter("testcase")]
    markup_name = next(name for name in names if "evil.example" in name)
    assert markup_name.endswith(MARKUP)  # `]]>` and `<&` as typed, escaped by the writer
    control_name = next(name for name in names if name.split(": ", 1)[1].startswith("Bill"))
    assert "␛[2J" in control_name and "<U+FFFF>" in control_name and not any(char in control_name for char in RAW)
    # The terminal: markup printed as typed (not obeyed), controls shown, no raw escape.
    assert "[/] [link=https://evil.example]pay[/link] ]]> <&" in run.stdout
    assert "Bill␛[2J␛[31m red␇" in run.stdout and not any(char in run.stdout for char in RAW)


def test_regress_writes_its_report_files_before_a_failing_terminal(golden_set, db_url, tmp_path) -> None:
    report, junit = tmp_path / "gone.json", tmp_path / "gone.xml"
    with FakeOpenAI() as fake:
        process = subprocess.Popen(
            [*relmon_cli.RELMON, "regress", str(candidates_file(tmp_path, golden_set)), "--json", str(report),
             "--junit", str(junit), "--min-pass", "0"],
            env=relmon_cli.clean_env(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake.base_url, DATABASE_URL=db_url),
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        process.stdout.close()  # the terminal goes away: printing the table fails
        _, err = process.communicate(timeout=120)
    assert process.returncode == 0, err.decode()
    assert "could not be printed" in err.decode() and "Traceback" not in err.decode()
    assert json.loads(report.read_text())["summary"]["items"] == 5
    assert len(ET.parse(junit).getroot().findall("testcase")) == 5


def test_golden_list_withholds_private_text_and_shows_hostile_text_plainly(golden_set, db_url, cli) -> None:
    listed = cli("golden", "list", base_url=None, DATABASE_URL=db_url, COLUMNS="300")
    assert listed.returncode == 0 and "PRIVMARK" not in listed.stdout and NOTE in listed.stdout
    assert listed.stdout.count("(private channel: withheld)") == 6  # question and expected answer, 3 items
    assert MARKUP in listed.stdout and "Bill␛[2J" in listed.stdout
    assert not any(char in listed.stdout for char in RAW)
    every = cli("golden", "list", "--include-private", base_url=None, DATABASE_URL=db_url, COLUMNS="300")
    assert every.returncode == 0 and all(question in every.stdout for question in PRIVATE_QUESTIONS.values())
    assert "withheld" not in every.stdout


@pytest.fixture
def gaps_week(db_url: str) -> dict[int, str]:
    """The corpus's week with every other question of the failing topic asked in a private channel, the teammate's
    answers there marked; a public teammate answer that is hostile. Returns the private questions by pair id."""
    rows = corpus()
    questions, private = [], {}
    for question in corpus_questions():
        in_topic = rows[question.pair_id - 1]["topic"] == FAILING_TOPIC
        if in_topic and question.pair_id % 2 == 0:
            answer = f"PRIVMARK refund note {question.pair_id}" if question.teammate_answer else None
            question = dataclasses.replace(question, channel_id="G0PRIVATE", teammate_answer=answer)
            private[question.pair_id] = question.text
        elif in_topic and question.teammate_answer:
            question = dataclasses.replace(question, teammate_answer=f"{CONTROL} {MARKUP} refunded pro rata")
        questions.append(question)
    database = Database(db_url)
    store_questions(database, questions, private_channels=frozenset({"G0PRIVATE"}))
    database.dispose()
    return private


def gaps(cli, db_url: str, *extra: str):
    with FakeOpenAI() as fake:
        return cli("gaps", "--since", "2026-11-23", *extra, base_url=fake.base_url, DATABASE_URL=db_url)


def test_gaps_withhold_private_questions_and_answers_in_markdown_and_json(gaps_week, db_url, cli) -> None:
    every = json.loads(gaps(cli, db_url, "--format", "json", "--include-private").stdout)
    private_gaps = [gap for gap in every["gaps"] if gap["channel"] == "G0PRIVATE"]
    assert private_gaps and every["private_withheld"] == 0 and every["note"] is None
    assert any("PRIVMARK" in (gap["answer"] or "") for gap in private_gaps)

    markdown = gaps(cli, db_url)
    assert markdown.returncode == 0 and "PRIVMARK" not in markdown.stdout
    assert all(f"## {gap['question']}" not in markdown.stdout for gap in private_gaps)
    note = f"{len(private_gaps)} private item{'s' if len(private_gaps) > 1 else ''} withheld; --include-private"
    assert note in markdown.stdout

    plain = json.loads(gaps(cli, db_url, "--format", "json").stdout)
    assert "PRIVMARK" not in json.dumps(plain) and plain["private_withheld"] == len(private_gaps)
    withheld = [gap for gap in plain["gaps"] if gap["withheld"]]
    assert len(withheld) == len(private_gaps) and all(gap["question"] is None for gap in withheld)
    assert all(text not in json.dumps(plain) for text in gaps_week.values())

    shown = gaps(cli, db_url, "--include-private").stdout
    assert "PRIVMARK" in shown and "withheld" not in shown


def test_gaps_show_hostile_answers_plainly(gaps_week, db_url, cli) -> None:
    markdown = gaps(cli, db_url).stdout
    assert "Bill␛[2J␛[31m red␇" in markdown and MARKUP in markdown and not any(char in markdown for char in RAW)
    as_json = gaps(cli, db_url, "--format", "json").stdout
    answers = [gap["answer"] for gap in json.loads(as_json)["gaps"]]
    assert any(answer and answer.startswith(CONTROL) for answer in answers)  # intact
    assert not any(char in as_json for char in RAW)


@pytest.mark.parametrize("fmt", ["jsonl", "deepeval"])
def test_golden_export_reads_back_hostile_text_intact(golden_set, db_url, cli, tmp_path, fmt) -> None:
    path = tmp_path / f"set.{fmt}"
    assert cli("golden", "export", "--format", fmt, "-o", str(path), base_url=None, DATABASE_URL=db_url).returncode == 0
    text = path.read_text(encoding="utf-8")
    records = json.loads(text) if fmt == "deepeval" else [json.loads(line) for line in text.splitlines()]
    assert {record.get("question", record.get("input")) for record in records} == {MARKUP, CONTROL}
    assert not any(char in text for char in RAW) and "PRIVMARK" not in text


def test_regress_says_which_report_file_it_could_not_write_and_writes_the_other(golden_set, db_url, cli,
                                                                                 tmp_path) -> None:  # fmt: skip
    junit, nowhere = tmp_path / "written.xml", tmp_path / "no such folder" / "r.json"
    with FakeOpenAI() as fake:
        outcome = cli("regress", str(candidates_file(tmp_path, golden_set)), "--json", str(nowhere), "--junit",
                      str(junit), "--min-pass", "0", base_url=fake.base_url, DATABASE_URL=db_url)  # fmt: skip
    assert outcome.returncode == 2 and "--json" in outcome.stderr and "cannot write it" in outcome.stderr
    assert len(ET.parse(junit).getroot().findall("testcase")) == 5 and "pass rate" in outcome.stdout


@pytest.fixture
def hostile_topic_week(db_url: str) -> None:
    """The corpus's week with every question of the failing topic carrying control characters and markup."""
    questions = [
        dataclasses.replace(question, text=f"{CONTROL} {MARKUP} {question.text}")
        if corpus()[question.pair_id - 1]["topic"] == FAILING_TOPIC
        else question
        for question in corpus_questions()
    ]
    database = Database(db_url)
    store_questions(database, questions)
    database.dispose()


def test_topics_text_shows_hostile_questions_plainly(hostile_topic_week, db_url, cli) -> None:
    with FakeOpenAI() as fake:
        shown = cli("topics", "--since", "2026-11-23", base_url=fake.base_url, DATABASE_URL=db_url, COLUMNS="300")
    assert shown.returncode == 0, shown.stderr
    assert "Bill␛[2J␛[31m red␇" in shown.stdout and not any(char in shown.stdout for char in RAW)
