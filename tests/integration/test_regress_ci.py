"""`relmon regress` for CI, through the `relmon` command (relmon.cli.main) on a real database and the fake LLM over
HTTP: golden items missing from the candidates file are named and fail the run unless --allow-missing, the last
line says why the run failed or passed, and the JSON and JUnit reports carry per item the question, the expected
and candidate answers and each judge's score and reasoning (none of a private channel's words unless
--include-private), in JUnit XML that parses whatever was typed."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from store import golden
from store.db import Database
from store.golden_rules import ORIGIN_TAKEOVER, Occurrence
from tests import relmon_cli
from tests.fakes.openai_replies import prompt_text, seed_kind
from tests.fakes.openai_server import FakeOpenAI

cli = relmon_cli.cli

PUBLIC = {
    "reset": ("How do I reset my password?", "Settings > Security > Reset password."),
    "rotate": ("How do I rotate my API key?", "Settings > Keys > Rotate."),
    "export": ("How do I export my data to CSV?", "Settings > Data > Export."),
    "sso": ("Which plans include SSO?", "Business and Enterprise."),
    "refund": ("How do I get a refund for a duplicate charge on my card?", "Write to billing within 30 days."),
}
PRIVATE = ("Where is the VPN guide PRIVMARK-QUESTION?", "PRIVMARK-EXPECTED: on the intranet.")
GOOD = {name: f"{expected} (v2)" for name, (_question, expected) in PUBLIC.items()} | {"vpn": "PRIVMARK-ANSWER v2"}
WITHHELD_TEXT = "(private channel: withheld): the question, the answers and the judges' reasoning are left out"


@pytest.fixture
def items(database: Database) -> dict[str, int]:
    """Six golden items: five public ones, and one from a private channel (`vpn`)."""
    rows = [(name, "C1", question, expected, False) for name, (question, expected) in PUBLIC.items()]
    rows.append(("vpn", "G1", *PRIVATE, True))
    ids = {}
    with database.session() as session:
        for n, (name, channel, question, expected, private) in enumerate(rows, start=1):
            occurrence = Occurrence(channel, f"{n}.0", f"{n}.1", f"{n}.2", question, None, "offtopic", expected,
                                    None, private, ORIGIN_TAKEOVER, pair_id=n)  # fmt: skip
            ids[name] = golden.add_occurrence(session, occurrence)[0]
    return ids


@dataclasses.dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    report_text: str
    junit_text: str
    ids: dict[str, int]

    @property
    def report(self) -> dict:
        return json.loads(self.report_text)

    @property
    def suite(self) -> ET.Element:
        return ET.fromstring(self.junit_text.encode("utf-8"))  # well-formed, or this raises

    @property
    def last_line(self) -> str:
        return self.stdout.strip().splitlines()[-1]

    def item(self, name: str) -> dict:
        return next(line for line in self.report["items"] if line["id"] == str(self.ids[name]))

    def case(self, name: str) -> ET.Element:
        prefix = f"item {self.ids[name]}: "
        return next(case for case in self.suite.iter("testcase") if case.get("name").startswith(prefix))


def regress(cli, db_url: str, tmp_path: Path, ids: dict[str, int], answers: dict[str, str], *extra: str,
            fake: FakeOpenAI | None = None, columns: int = 200, **env: str) -> Run:  # fmt: skip
    """`relmon regress` on the answers (name → answer) with --json and --junit, compared with no baseline."""
    path = tmp_path / "candidates.jsonl"
    path.write_text("".join(json.dumps({"id": ids[name], "answer": text}) + "\n" for name, text in answers.items()))
    report, junit = tmp_path / "report.json", tmp_path / "report.xml"
    with FakeOpenAI() if fake is None else fake as server:
        outcome = cli("regress", str(path), "--json", str(report), "--junit", str(junit), "--baseline", "none",
                      *extra, base_url=server.base_url, DATABASE_URL=db_url, COLUMNS=str(columns), **env)  # fmt: skip
    return Run(outcome.returncode, outcome.stdout, outcome.stderr, report.read_text("utf-8"),
               junit.read_text("utf-8"), ids)  # fmt: skip


def without(*names: str) -> dict[str, str]:
    return {name: answer for name, answer in GOOD.items() if name not in names}


def test_a_missing_item_is_named_and_fails_the_run(items, db_url, cli, tmp_path) -> None:
    run = regress(cli, db_url, tmp_path, items, without("refund"))
    assert run.code == 2, run.stderr  # an incomplete candidates file: the input's problem, not a regression (1)
    assert (
        run.last_line == "FAIL: 1 item missing (use --allow-missing to run without it); pass rate 100% ≥ 80% required"
    )
    assert "1 golden item not in candidates.jsonl, not run:" in run.stdout
    assert f"item {items['refund']}: How do I get a refund for a duplicate charge on my card?" in run.stdout
    report = run.report
    assert (report["summary"]["golden_items"], report["summary"]["items"], report["summary"]["missing"]) == (6, 5, 1)
    assert report["result"] == {"passed": False, "line": run.last_line,
                                "reasons": ["1 item missing (use --allow-missing to run without it)"]}  # fmt: skip
    refund = run.item("refund")
    assert refund["outcome"] == "missing" and refund["answer"] is None and refund["judges"] == {}
    assert refund["question"] == PUBLIC["refund"][0] and refund["expected"] == PUBLIC["refund"][1]
    suite = run.suite
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("6", "1", "0")
    assert len(suite.findall("testcase")) == 6
    failure = run.case("refund").find("failure")
    assert failure.get("type") == "missing" and "use --allow-missing" in failure.get("message")
    assert suite.find("properties/property[@name='result']").get("value") == run.last_line


def test_allow_missing_passes_without_the_missing_item_and_still_lists_it(items, db_url, cli, tmp_path) -> None:
    run = regress(cli, db_url, tmp_path, items, without("refund", "sso"), "--allow-missing")
    assert run.code == 0, run.stderr
    assert run.last_line == "PASS: pass rate 100% ≥ 80% required; 2 items missing, not run (--allow-missing)"
    assert f"item {items['sso']}: Which plans include SSO?" in run.stdout
    suite = run.suite
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("6", "0", "2")
    assert "not run (--allow-missing)" in run.case("sso").find("skipped").get("message")
    assert run.report["result"]["passed"] and run.report["summary"]["missing"] == 2


def test_the_last_line_says_every_reason_the_run_failed(items, db_url, cli, tmp_path) -> None:
    answers = without("refund") | {"rotate": "offtopic: turn it off", "export": "offtopic: we sell hats"}
    run = regress(cli, db_url, tmp_path, items, answers, columns=60)  # a narrow CI log: the line stays whole
    assert run.code == 1, run.stderr  # a regression among the items judged says 1, items missing or not
    assert run.last_line == "FAIL: pass rate 60% < 80% required; 1 item missing (use --allow-missing to run without it)"


def test_the_last_line_names_the_items_that_regressed_since_the_baseline(items, db_url, cli, tmp_path) -> None:
    path = tmp_path / "first.json"
    first = regress(cli, db_url, tmp_path, items, GOOD)
    assert first.code == 0 and first.last_line == "PASS: pass rate 100% ≥ 80% required"
    path.write_text(first.report_text)
    run = regress(cli, db_url, tmp_path, items, GOOD | {"rotate": "offtopic"}, "--baseline", str(path),
                  "--min-pass", "0.5")  # fmt: skip
    assert run.code == 1
    assert run.last_line == f"FAIL: 1 item regressed (passed in {path}, fail now); pass rate 83% ≥ 50% required"


def test_an_item_missing_from_the_baseline_run_is_new_when_it_comes_back(items, db_url, cli, tmp_path) -> None:
    first = regress(cli, db_url, tmp_path, items, without("refund"), "--allow-missing")
    run_id = str(first.report["run_id"])
    second = regress(cli, db_url, tmp_path, items, GOOD, "--baseline", run_id)
    assert second.code == 0 and second.item("refund")["change"] == "new"
    assert second.last_line == f"PASS: pass rate 100% ≥ 80% required; nothing regressed since run {run_id}"


def test_the_reports_carry_the_texts_and_each_judges_score_and_reasoning(items, db_url, cli, tmp_path) -> None:
    run = regress(cli, db_url, tmp_path, items, GOOD | {"export": "partial: maybe Settings"}, "--min-pass", "0")
    assert run.code == 0, run.stderr
    export = run.item("export")
    assert (export["question"], export["expected"], export["answer"]) == (*PUBLIC["export"], "partial: maybe Settings")
    judges = export["judges"]
    assert set(judges) == {"relevancy", "correctness", "grounded", "grounded_swapped"}
    assert judges["relevancy"] | {} == judges["relevancy"] and judges["relevancy"]["score"] == 2
    assert judges["relevancy"]["reasoning"] == "The response is graded 2 for relevancy."
    assert (
        judges["correctness"]["score"] == 1
        and "compared with the reference answer" in judges["correctness"]["reasoning"]
    )
    # The grounded judge in both orders: the candidate's grade and reason, and the expected answer's.
    for check in ("grounded", "grounded_swapped"):
        assert (judges[check]["score"], judges[check]["expected_score"]) == (3, 5)
        assert judges[check]["reasoning"] == judges[check]["expected_reasoning"] == "Graded by topic."
    assert export["scores"]["grounded"] == [3, 3] and export["failed_by"] == ["relevancy", "correctness", "grounded"]
    # JUnit: the failure names the judges and gives their reasoning; system-out has the texts and every judge.
    case = run.case("export")
    failure = case.find("failure")
    assert failure.get("message") == "failed by relevancy, correctness, grounded"
    assert "relevancy: 2 of 4: The response is graded 2 for relevancy." in failure.text
    assert (
        "correctness: 1 of 2:" in failure.text and "grounded, swapped (candidate as answer 1): 3 of 5" in failure.text
    )
    out = case.find("system-out").text
    assert f"question: {PUBLIC['export'][0]}" in out and f"expected answer: {PUBLIC['export'][1]}" in out
    assert "candidate answer: partial: maybe Settings" in out
    assert "grounded (candidate as answer 2): 3 of 5 (expected answer 5): Graded by topic." in out
    passing = run.case("reset").find("system-out").text
    assert (
        "relevancy: 4 of 4: The response is graded 4 for relevancy." in passing
        and run.case("reset").find("failure") is None
    )
    # The counts agree with the testcases.
    suite = run.suite
    cases = suite.findall("testcase")
    assert int(suite.get("tests")) == len(cases) == 6
    assert int(suite.get("failures")) == sum(case.find("failure") is not None for case in cases) == 1


def test_a_private_item_carries_no_text_without_include_private(items, db_url, cli, tmp_path) -> None:
    # A judge that quotes the answer it judged: its reasoning holds the private answer's words.
    run = regress(cli, db_url, tmp_path, items, GOOD, fake=FakeOpenAI(quote_answer=True))
    assert run.code == 0, run.stderr
    for output in (run.stdout, run.stderr, run.report_text, run.junit_text):
        assert "PRIVMARK" not in output
    vpn = run.item("vpn")
    assert vpn["withheld"] and vpn["question"] is vpn["expected"] is vpn["answer"] is None
    for check in vpn["judges"].values():  # the scores, none of the words
        assert check["score"] is not None and check["reasoning"] is None
        assert check.get("expected_reasoning") is None and check["error"] is None
    assert run.report["private_withheld"] == 1
    case = run.case("vpn")
    assert case.get("name").endswith("(private channel: withheld)")
    out = case.find("system-out").text
    assert out.startswith(WITHHELD_TEXT) and "relevancy: 4 of 4" in out
    assert "The response says" in run.case("reset").find("system-out").text  # a public item's reasoning is quoted


def test_a_missing_private_item_is_listed_by_id_only(items, db_url, cli, tmp_path) -> None:
    run = regress(cli, db_url, tmp_path, items, without("vpn"))
    assert run.code == 2
    assert f"item {items['vpn']}: (private channel: withheld)" in run.stdout and "PRIVMARK" not in run.stdout
    assert "PRIVMARK" not in run.report_text + run.junit_text
    assert run.item("vpn")["outcome"] == "missing" and run.item("vpn")["expected"] is None


def test_include_private_quotes_the_private_items_texts(items, db_url, cli, tmp_path) -> None:
    run = regress(cli, db_url, tmp_path, items, GOOD, "--include-private", fake=FakeOpenAI(quote_answer=True))
    vpn = run.item("vpn")
    assert (vpn["question"], vpn["expected"], vpn["answer"]) == (*PRIVATE, GOOD["vpn"])
    assert "PRIVMARK-ANSWER" in vpn["judges"]["relevancy"]["reasoning"]
    assert "candidate answer: PRIVMARK-ANSWER v2" in run.case("vpn").find("system-out").text


# Terminal escapes, a bell, a C1 control, noncharacters XML 1.0 forbids, a bidi override, CDATA's end, markup.
HOSTILE = "Billing \x1b[2J\x1b[31m red\x07 \x9b6n \uffff\ufffe \u202eok\x7f\x01 ]]> <&> [/] line one\r\nline two"
RAW = ("\x1b", "\x07", "\x9b", "\uffff", "\ufffe", "\u202e", "\x7f", "\x01", "\r")


def test_hostile_answers_and_reasoning_leave_the_junit_xml_valid(items, db_url, cli, tmp_path) -> None:
    run = regress(cli, db_url, tmp_path, items, GOOD | {"sso": HOSTILE}, "--min-pass", "0",
                  fake=FakeOpenAI(quote_answer=True))  # fmt: skip
    assert run.code == 0, run.stderr
    out = run.case("sso").find("system-out").text  # the file parsed (run.case), and says what was typed, visibly
    assert (
        "candidate answer:\n    Billing ␛[2J␛[31m red␇ <U+009B>6n <U+FFFF><U+FFFE> <U+202E>ok␡␁ ]]> <&> [/] line one␍"
        in out
    )
    assert "    line two" in out and not any(char in run.junit_text for char in RAW)
    assert "The response says: Billing ␛[2J" in out  # the judge's reasoning quoting it, made visible too
    assert run.item("sso")["answer"] == HOSTILE  # the JSON reads back as the very string
    assert not any(char in run.report_text for char in RAW)
    assert not any(char in run.stdout for char in RAW)


def test_a_junit_reader_takes_the_file(items, db_url, cli, tmp_path) -> None:
    import junitparser  # a dev dependency: the XML read as CI tools read it

    run = regress(cli, db_url, tmp_path, items, without("refund") | {"sso": HOSTILE}, "--min-pass", "0")
    suite = junitparser.JUnitXml.fromstring(run.junit_text.encode("utf-8"))
    assert (suite.tests, suite.failures) == (6, 1)


def unreadable_relevancy(body: dict) -> str | None:
    """The relevancy judge answers prose without its JSON for an answer saying "garbled"."""
    prompt = prompt_text(body)
    return "I would rather not say." if seed_kind(prompt) == "relevancy" and "garbled" in prompt else None


def test_a_check_without_a_verdict_is_a_junit_error_saying_why(items, db_url, cli, tmp_path) -> None:
    fake = FakeOpenAI()
    fake.set_reply(unreadable_relevancy)
    run = regress(cli, db_url, tmp_path, items, GOOD | {"sso": "garbled: Business"}, "--min-pass", "0", fake=fake)
    assert run.code == 0, run.stderr
    relevancy = run.item("sso")["judges"]["relevancy"]
    assert run.item("sso")["outcome"] == "error" and relevancy["status"] == "error" and relevancy["error"]
    error = run.case("sso").find("error")
    assert error.get("message") == "no verdict from relevancy"
    assert error.text.startswith("relevancy: no verdict (error)") and relevancy["error"].split()[0] in error.text
    assert run.suite.get("errors") == "1"


def test_the_reports_redact_the_answers_and_the_judges_words(items, db_url, cli, tmp_path) -> None:
    answer = "Write to ana@example.com for the SSO plans."
    run = regress(cli, db_url, tmp_path, items, GOOD | {"sso": answer}, fake=FakeOpenAI(quote_answer=True),
                  RELMON_REDACT_PII="true")  # fmt: skip
    assert run.code == 0, run.stderr
    assert "ana@example.com" not in run.report_text + run.junit_text
    sso = run.item("sso")
    assert sso["answer"] == "Write to [EMAIL] for the SSO plans."
    assert "[EMAIL]" in sso["judges"]["relevancy"]["reasoning"]  # the judge quoted it: redacted as well
