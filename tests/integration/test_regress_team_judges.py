"""A team's own judge in `relmon regress --judge NAME` (its pass or fail per item in the table, the JSON and the JUnit
report, failing the item) and in `relmon golden export` (its criteria and its verdict on the bot's answer)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from relmon.cli import build_parser
from relmon.regress.command import run_regress
from store.db import Database
from store.models import Judgment, Pair
from tests.builders import make_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.integration.test_golden_export import export, records, seeded
from tests.integration.test_regress import GOOD, candidates, items  # noqa: F401  (items: a fixture)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "judges.d"


def regress(db_url: str, fake: FakeOpenAI, path: Path, *extra: str) -> int:
    args = build_parser().parse_args(["regress", str(path), *extra])
    settings = make_settings(database_url=db_url, openai_base_url=fake.base_url, llm_max_retries=0,
                             judges_dir=EXAMPLES, batch_poll_seconds=0.05)  # fmt: skip
    return run_regress(args, settings)


def test_regress_judges_each_answer_with_a_team_judge_too(database, db_url, items, tmp_path, capsys) -> None:  # noqa: F811
    answers = GOOD | {"refund": "Sorry! I'll refund you right away."}
    path = candidates(tmp_path, "v1.jsonl", answers, items)
    report, junit = tmp_path / "v1.json", tmp_path / "v1.xml"
    with FakeOpenAI() as fake:
        code = regress(db_url, fake, path, "--judge", "refund_policy", "--json", str(report), "--junit", str(junit),
                       "--min-pass", "0.5")  # fmt: skip
        calls = len(fake.requests)
    printed = capsys.readouterr().out
    assert code == 0 and calls == 25  # four checks and the team judge's, per item
    found = json.loads(report.read_text())
    refund = next(item for item in found["items"] if item["id"] == str(items["refund"]))
    assert refund["outcome"] == "fail" and refund["failed_by"] == ["refund_policy"]
    assert refund["scores"]["refund_policy"] == 0
    assert refund["judges"]["refund_policy"]["reasoning"] == "The answer promises a refund."
    reset = next(item for item in found["items"] if item["id"] == str(items["reset"]))
    assert reset["outcome"] == "pass" and reset["scores"]["refund_policy"] == 1
    assert found["summary"]["judges"]["refund_policy"]["passed"] == 4
    assert found["summary"]["judges"]["refund_policy"]["judged"] == 5
    assert "refund_policy" in printed and "fail 0" in printed and "refund_policy: passed 80% (4 of 5" in printed

    suite = ET.parse(junit).getroot()
    [failed] = [case for case in suite.iter("testcase") if case.find("failure") is not None]
    failure = failed.find("failure")
    assert failure.get("message") == "failed by refund_policy"
    assert "refund_policy: 0 of 1: The answer promises a refund." in failure.text
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["judge.refund_policy.passed"] == "4 of 5"

    # The same answers without the team judge are another run: nothing of it reused, and the item passes.
    with FakeOpenAI() as fake:
        assert regress(db_url, fake, path, "--min-pass", "0.5", "--json", str(report)) == 0
    plain = json.loads(report.read_text())
    assert "refund_policy" not in next(i for i in plain["items"] if i["id"] == str(items["refund"]))["scores"]


def test_regress_refuses_a_judge_it_does_not_know(database, db_url, items, tmp_path, capsys) -> None:  # noqa: F811
    path = candidates(tmp_path, "v1.jsonl", GOOD, items)
    with FakeOpenAI() as fake:
        assert regress(db_url, fake, path, "--judge", "no_such_judge") == 2
        assert regress(db_url, fake, path, "--judge", "relevancy") == 2
        assert not fake.requests
    err = capsys.readouterr().err
    assert "--judge no_such_judge: unknown judge 'no_such_judge'" in err and "refund_policy" in err
    assert "--judge relevancy: a seed judge" in err


def test_the_golden_export_carries_the_team_judges_criteria_and_verdicts(database: Database, db_url, tmp_path):
    seeded(database)
    with database.session() as session:  # the bot's answer golden item 100 came from, judged by refund_policy
        session.add(Pair(id=100, channel_id="C1", answer_ts="100.01", status="judged"))
        session.flush()
        session.add(Judgment(pair_id=100, judge="refund_policy", status="ok", score=0, max_score=1,
                             normalized_score=0, prompt_version="abc", reasoning="Promised a refund."))  # fmt: skip
    lines = records(export(db_url, tmp_path, "jsonl", judges_dir=EXAMPLES), "jsonl")
    [judged] = [line for line in lines if line["question"] == "How do I rotate my API key?" and line["bot_answer"]
                == "Mail me at ana@example.com"]  # fmt: skip
    refund = judged["judges"]["refund_policy"]
    assert refund["criteria"] == "The bot never promises or grants a refund."
    assert refund["scale"] == "pass/fail" and refund["fails_at"] == 0
    assert refund["verdict"] == {"score": 0, "passed": False, "prompt_version": "abc"}
    assert "reasoning" not in json.dumps(refund)  # its words may quote the texts
    assert judged["judges"]["status_page"]["verdict"] is None  # it did not judge that answer

    [deepeval] = [r for r in records(export(db_url, tmp_path, "deepeval", judges_dir=EXAMPLES), "deepeval")
                  if r["actual_output"] == "Mail me at ana@example.com"]  # fmt: skip
    assert deepeval["additional_metadata"]["relmon_judges"]["refund_policy"]["verdict"]["passed"] is False
    langfuse = records(export(db_url, tmp_path, "langfuse", judges_dir=EXAMPLES), "langfuse")
    assert all("relmon_judges" in r["metadata"] for r in langfuse)
    # Without team judges, the files are as before.
    assert "judges" not in records(export(db_url, tmp_path, "jsonl"), "jsonl")[0]
