"""`relmon eval` against the fake OpenAI server: agreement with human labels from a file or, with --from-feedback,
from people's votes on alerts in a real database; malformed labels. The main paths as real subprocesses, the rest
in process through `relmon.cli.main`. `relmon judge`: tests/system/test_judges_cli.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from statsmodels.stats.inter_rater import cohens_kappa

from tests import relmon_cli
from tests.fakes.openai_server import FakeOpenAI
from tests.relmon_cli import ROOT, relmon

# The fixtures of tests/relmon_cli.py, bound here: this module's `fake` is the fake OpenAI server, not the
# fake Slack of tests/conftest.py.
server, fake, cli = relmon_cli.server, relmon_cli.fake, relmon_cli.cli


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
    # Its 95% interval, against statsmodels' (Fleiss–Cohen–Everitt), clipped to kappa's range.
    reference = cohens_kappa(np.array(report["confusion"]["matrix"]), wt="quadratic")
    assert reference.kappa == pytest.approx(report["kappa_quadratic"])
    expected = [max(-1.0, reference.kappa_low), min(1.0, reference.kappa_upp)]
    assert report["kappa_quadratic_interval"] == pytest.approx(expected)
    assert [(w["line"], w["human"], w["judge"]) for w in report["worst"]] == [(2, 1, 4), (4, 3, 4)]
    assert len(fake.requests) == 10

    readable = cli("eval", str(labels), base_url=fake.base_url)
    assert readable.returncode == 0
    assert "Cohen's kappa (quadratic weights)" in readable.stdout and ", 95%)" in readable.stdout
    assert "worst disagreements" in readable.stdout


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
