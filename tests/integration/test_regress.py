"""`relmon regress` against the fake LLM over HTTP: improved, regressed, uncertain and failing items, the exit codes,
the JSON and JUnit reports, the Batch API path, resuming after an LLM outage without judging anything twice, and
bad candidates files refused with their line numbers before anything is judged."""

from __future__ import annotations

import json
import re
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from relmon.cli import build_parser
from relmon.regress.command import run_regress
from store import golden, golden_import
from store.db import Database
from store.golden_rules import ORIGIN_TAKEOVER, Occurrence
from store.settings import Settings
from tests.builders import make_settings
from tests.fakes.openai_replies import prompt_text, seed_kind
from tests.fakes.openai_server import FakeOpenAI

QUESTIONS = {
    "reset": ("How do I reset my password?", "Settings > Security > Reset password."),
    "rotate": ("How do I rotate my API key?", "Settings > Keys > Rotate."),
    "export": ("How do I export my data to CSV?", "Settings > Data > Export."),
    "sso": ("Which plans include SSO?", "Business and Enterprise."),
    "refund": ("How do I get a refund?", "Write to billing within 30 days."),
}


def position_biased(body: dict) -> str | None:
    """A grounded judge that favours whichever answer comes first when an answer says "biased", as real LLMs do."""
    prompt = prompt_text(body)
    if seed_kind(prompt) != "grounded" or "biased" not in prompt:
        return None
    grade = {"answer_affirms_no_document_answers": False, "answer_relevancy_justification": "first is better"}
    return json.dumps({"answer_1": grade | {"answer_relevancy": 5}, "answer_2": grade | {"answer_relevancy": 2}})


@pytest.fixture
def items(database: Database) -> dict[str, int]:
    ids = {}
    with database.session() as session:
        for n, (name, (question, expected)) in enumerate(QUESTIONS.items(), start=1):
            occurrence = Occurrence("C1", f"{n}.0", f"{n}.1", f"{n}.2", question, None, "offtopic", expected,
                                    None, False, ORIGIN_TAKEOVER, pair_id=n)  # fmt: skip
            ids[name] = golden.add_occurrence(session, occurrence)[0]
    return ids


def candidates(tmp_path: Path, name: str, answers: dict, ids: dict[str, int]) -> Path:
    path = tmp_path / name
    lines = [json.dumps({"id": ids[key], "answer": answer}) for key, answer in answers.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def regress(db_url: str, fake: FakeOpenAI, path: Path, *extra: str) -> int:
    args = build_parser().parse_args(["regress", str(path), *extra])
    settings = make_settings(database_url=db_url, openai_base_url=fake.base_url, llm_max_retries=0,
                             batch_poll_seconds=0.05)  # fmt: skip
    return run_regress(args, settings)


GOOD = {key: f"{expected} (v1)" for key, (_q, expected) in QUESTIONS.items()}


@dataclass
class TwoVersions:
    """v1 of the answers (one off-topic: 4 of 5 pass) run at --min-pass 0.8, then v2 (one fixed, three broken, one
    of them judged differently in the two orders) compared with it at --min-pass 0.1, with JSON and JUnit reports."""

    exit_codes: tuple[int, int]
    v1_requests: int
    report: dict
    junit: ET.Element
    printed: str
    items: dict[str, int]

    def item(self, name: str) -> dict:
        return next(item for item in self.report["items"] if item["id"] == str(self.items[name]))


@pytest.fixture
def two_versions(database, db_url, items, tmp_path, capsys) -> TwoVersions:
    v1 = candidates(tmp_path, "v1.jsonl", GOOD | {"rotate": "offtopic: try turning it off"}, items)
    v2_answers = GOOD | {"export": "offtopic: we sell hats", "sso": "biased: Business", "refund": "partial: write"}
    v2 = candidates(tmp_path, "v2.jsonl", v2_answers, items)
    report, junit = tmp_path / "v2.json", tmp_path / "v2.xml"
    with FakeOpenAI() as fake:
        fake.set_reply(position_biased)
        first = regress(db_url, fake, v1, "--min-pass", "0.8")
        v1_requests = len(fake.requests)
        second = regress(db_url, fake, v2, "--json", str(report), "--junit", str(junit), "--min-pass", "0.1")
    printed = capsys.readouterr().out
    junit_suite = ET.parse(junit).getroot()
    return TwoVersions((first, second), v1_requests, json.loads(report.read_text()), junit_suite, printed, items)


def test_regress_exits_1_on_a_regression_even_above_the_minimum_pass_rate(two_versions) -> None:
    assert two_versions.exit_codes == (0, 1)  # v1: 4 of 5 pass, 0.8; v2: 0.4, above 0.1, but items regressed


def test_each_item_takes_four_llm_calls(two_versions) -> None:
    assert two_versions.v1_requests == 20  # relevancy, correctness, grounded twice


def test_each_item_is_said_to_have_improved_or_regressed_since_the_last_run(two_versions) -> None:
    outcome = {item["id"]: (item["outcome"], item["change"]) for item in two_versions.report["items"]}
    items = two_versions.items
    assert outcome[str(items["rotate"])] == ("pass", "improved")
    assert outcome[str(items["export"])] == ("fail", "regressed")
    assert outcome[str(items["refund"])] == ("fail", "regressed")
    assert outcome[str(items["reset"])] == ("pass", None)


def test_an_item_whose_two_orders_disagree_is_uncertain(two_versions) -> None:
    sso = two_versions.item("sso")
    assert (sso["outcome"], sso["change"]) == ("uncertain", None)  # the two orders disagree: not averaged
    assert sso["scores"]["grounded"] == [2, 5] and "disagree" in sso["notes"][0]


def test_a_failing_item_names_the_checks_that_failed_it(two_versions) -> None:
    refund = two_versions.item("refund")
    assert refund["failed_by"] == ["relevancy", "correctness", "grounded"] and refund["scores"]["relevancy"] == 2


def test_the_summary_counts_the_outcomes_with_a_wilson_interval_on_the_pass_rate(two_versions) -> None:
    summary = two_versions.report["summary"]
    assert (summary["passed"], summary["failed"], summary["uncertain"]) == (2, 2, 1)
    assert summary["improved"] == 1 and summary["regressed"] == 2 and summary["pass_rate"] == 0.4
    low, high = summary["pass_rate_interval_95"]
    assert 0.11 < low < 0.12 and 0.76 < high < 0.77  # Wilson, 2 of 5


def test_the_junit_report_fails_the_failing_items_skipping_the_uncertain_ones(two_versions) -> None:
    suite, items = two_versions.junit, two_versions.items
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("5", "2", "1")
    cases = {case.get("name").split(":")[0]: case for case in suite.iter("testcase")}
    assert (
        cases[f"item {items['export']}"].find("failure").get("message") == "failed by relevancy, correctness, grounded"
    )
    assert cases[f"item {items['sso']}"].find("skipped") is not None
    assert cases[f"item {items['reset']}"].find("failure") is None


def test_the_printed_report_says_what_regressed_with_the_pass_rate(two_versions) -> None:
    assert "regressed" in two_versions.printed and "pass rate 40%" in two_versions.printed


def test_the_reports_quote_questions_redacted(database, db_url, tmp_path) -> None:
    with database.session() as session:
        imported = {"question": "Why was ana@example.com charged twice?", "expected": "A duplicate: refunded."}
        golden_import.import_items(session, [imported])
        [item] = golden.active_items(session)
        item_id = item.id
    path = tmp_path / "answers.csv"
    path.write_text(f"id,answer\n{item_id},A duplicate charge: we refund it.\n", encoding="utf-8")
    report = tmp_path / "report.json"
    with FakeOpenAI() as fake:
        args = build_parser().parse_args(["regress", str(path), "--json", str(report)])
        settings = make_settings(database_url=db_url, openai_base_url=fake.base_url, redact_pii=True)
        assert run_regress(args, settings) == 0
    [row] = json.loads(report.read_text())["items"]
    assert row["question"] == "Why was [EMAIL] charged twice?" and row["outcome"] == "pass"


@pytest.fixture
def half(items, tmp_path) -> Path:
    """Answers of which 3 of 5 pass."""
    return candidates(tmp_path, "half.jsonl", GOOD | {"rotate": "offtopic", "export": "offtopic"}, items)


def test_min_pass_is_the_lowest_pass_rate_that_exits_0(database, db_url, half, llm) -> None:
    assert regress(db_url, llm, half, "--baseline", "none", "--min-pass", "0.6") == 0
    assert regress(db_url, llm, half, "--baseline", "none", "--min-pass", "0.61") == 1
    assert regress(db_url, llm, half, "--min-pass", "1.5") == 2


def test_the_baseline_is_a_run_id_or_the_json_report_of_a_run(database, db_url, half, llm, tmp_path) -> None:
    first = tmp_path / "first.json"
    assert regress(db_url, llm, half, "--baseline", "none", "--min-pass", "0.6", "--json", str(first)) == 0
    run_id = str(json.loads(first.read_text())["run_id"])
    assert regress(db_url, llm, half, "--baseline", run_id, "--min-pass", "0.5") == 0  # same outcomes
    assert regress(db_url, llm, half, "--baseline", str(first), "--min-pass", "0.5") == 0  # its --json file
    assert regress(db_url, llm, half, "--baseline", "99") == 2


def test_the_same_answers_again_are_not_judged_twice(database, db_url, half, llm) -> None:
    assert regress(db_url, llm, half, "--baseline", "none", "--min-pass", "0.6") == 0
    assert regress(db_url, llm, half, "--min-pass", "0.5") == 0
    assert len(llm.requests) == 20  # the same answers again: the run's verdicts are kept, nothing judged twice


def test_fresh_judges_the_same_answers_again(database, db_url, half, llm) -> None:
    assert regress(db_url, llm, half, "--baseline", "none", "--min-pass", "0.6") == 0
    assert regress(db_url, llm, half, "--baseline", "none", "--min-pass", "0.6", "--fresh") == 0
    assert len(llm.requests) == 40  # --fresh judges them again


def test_the_batch_api_judges_at_half_price_with_the_same_outcomes(database, db_url, items, tmp_path) -> None:
    path = candidates(tmp_path, "v1.jsonl", GOOD | {"rotate": "offtopic"}, items)
    report = tmp_path / "batch.json"
    with FakeOpenAI() as fake:
        assert regress(db_url, fake, path, "--batch", "--json", str(report)) == 0
        assert len(fake.batches.requests) == 20 and fake.requests == []  # none judged online
    assert json.loads(report.read_text())["summary"]["passed"] == 4


def test_an_outage_mid_run_resumes_where_it_stopped(database, db_url, items, tmp_path, capsys) -> None:
    path = candidates(tmp_path, "v1.jsonl", GOOD, items)
    with FakeOpenAI(latency_ms=30) as fake:
        stop = threading.Event()

        def cut_the_llm_after_six() -> None:
            while not stop.is_set():
                if fake.statuses.get(200, 0) >= 6:
                    fake.set_behavior(always_status=503)
                    return
                time.sleep(0.002)

        watcher = threading.Thread(target=cut_the_llm_after_six, daemon=True)
        watcher.start()
        assert regress(db_url, fake, path, "--threads", "1") == 3  # an outage says nothing of a regression (1)
        stop.set()
        assert "run the same command again to resume" in capsys.readouterr().err
        kept = fake.statuses.get(200, 0)
        assert 6 <= kept < 20
        fake.set_behavior()  # the LLM is back
        assert regress(db_url, fake, path) == 0
        assert re.search(r"resuming run \d+ \((\d+) of 20 checks kept\)", capsys.readouterr().err)
        assert fake.statuses.get(200, 0) == 20  # every check answered once over both runs


def refused(db_url: str, path: Path, capsys) -> str:
    """Run regress on `path`: refused (exit 2) with nothing judged; what it said."""
    with FakeOpenAI() as fake:
        assert regress(db_url, fake, path) == 2
        assert fake.requests == []  # nothing judged
    return capsys.readouterr().err


def test_regress_without_an_openai_key_is_refused(database, db_url, items, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    no_key = build_parser().parse_args(["regress", str(candidates(tmp_path, "ok.jsonl", GOOD, items))])
    assert run_regress(no_key, Settings(_env_file=None, database_url=db_url)) == 2  # OpenAI without a key
    assert "OPENAI_API_KEY" in capsys.readouterr().err


def test_a_candidates_file_with_bad_lines_is_refused_naming_each_line(database, db_url, items, tmp_path,
                                                                      capsys) -> None:  # fmt: skip
    rows = [
        json.dumps({"id": items["reset"], "answer": "Settings."}),
        json.dumps({"id": 999, "answer": "x"}),
        json.dumps({"id": items["rotate"]}),
        json.dumps({"id": f"relmon-golden-{items['reset']}", "answer": "again"}),
        json.dumps({"question": "how do i export my data to csv", "answer": "Settings > Data."}),
        json.dumps({"question": "What is the meaning of life?", "answer": "42"}),
        "{not json",
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    err = refused(db_url, path, capsys)
    assert "line 2: no golden item 999" in err and "line 3: no answer for item" in err
    assert "line 4: item" in err and "first on line 1" in err and "line 6: no golden item asks" in err
    assert "line 7: not JSON" in err and "line 5" not in err


def test_a_candidates_file_not_in_utf8_is_refused_at_its_line(database, db_url, items, tmp_path, capsys) -> None:
    latin = tmp_path / "latin.csv"
    latin.write_bytes("id,answer\n1,ok\n2,Caf\xe9\n".encode("latin-1"))
    assert "line 3: not UTF-8" in refused(db_url, latin, capsys)


def test_a_missing_candidates_file_is_refused(database, db_url, items, tmp_path, capsys) -> None:
    refused(db_url, tmp_path / "missing.jsonl", capsys)


def test_a_candidates_file_past_the_size_limit_is_refused_where_it_passes_it(database, db_url, items, tmp_path,
                                                                             capsys, monkeypatch) -> None:  # fmt: skip
    big = tmp_path / "big.jsonl"
    with big.open("wb") as handle:
        handle.truncate(2**30)  # 1 GB (sparse): read up to the limit, not to its end
    monkeypatch.setattr("golden.candidates.MAX_BYTES", 2**20)
    assert "line 1: the file passes 1 MB here" in refused(db_url, big, capsys)


@pytest.fixture
def run_with_budget(database, db_url, items, tmp_path) -> Iterator[tuple[Callable[[int], int], FakeOpenAI]]:
    """`run(budget)`: the same answers judged with that daily budget; and the fake LLM they are judged by."""
    args = build_parser().parse_args(["regress", str(candidates(tmp_path, "v1.jsonl", GOOD, items))])
    with FakeOpenAI() as fake:
        settings = {"database_url": db_url, "openai_base_url": fake.base_url, "openai_api_key": "sk-test"}
        yield lambda budget: run_regress(args, make_settings(daily_budget=budget, **settings)), fake


def test_a_spent_budget_stops_the_run(run_with_budget, capsys) -> None:
    run, fake = run_with_budget
    assert run(7) == 3
    assert "daily budget of 7 judgments is spent" in capsys.readouterr().err
    assert fake.statuses.get(200, 0) == 7  # every paid check was judged and kept


def test_a_run_its_budget_stopped_is_finished_by_the_next_judging_nothing_twice(run_with_budget) -> None:
    run, fake = run_with_budget
    assert run(7) == 3
    assert run(100) == 0  # a raised budget
    assert fake.statuses.get(200, 0) == 20  # nothing judged twice
