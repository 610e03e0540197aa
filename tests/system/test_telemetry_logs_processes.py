"""Logs of relmon's own processes: a real bot, worker and beat write only JSON lines, with identifier fields and
never the message texts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import slack_requests as sr
from tests.log_capture import ANSWER, QUESTION
from tests.processes import json_lines
from tests.running_system import relmon_processes


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_relmons_real_processes_write_only_json_lines_with_identifiers(redis_url: str, tmp_path: Path) -> None:
    db_url = f"sqlite:///{tmp_path / 'relmon.sqlite3'}"
    with relmon_processes(
        redis_url=redis_url,
        database_url=db_url,
        directory=tmp_path,
        start=("bot", "worker", "beat"),
        RELMON_SETTLE_SECONDS="0",
    ) as system:
        bot, worker, beat, base_url = system.bot, system.worker, system.beat, system.base_url
        beat.wait_for_log("beat: Starting", timeout=60)
        question = sr.human_message("C_SUPPORT", sr.next_ts(), QUESTION)
        answer = sr.bot_message("C_SUPPORT", sr.next_ts(), ANSWER, thread_ts=question["ts"])
        for event in (question, answer):
            assert system.post_event(event).status_code == 200
        worker.wait_for_log('"pair settled"', timeout=60)
        for process in (bot, worker, beat):
            assert process.stop() in (0, -15), process.tail()

    outputs = {"bot": bot.log(), "worker": worker.log(), "beat": beat.log()}
    parsed = {name: json_lines(output) for name, output in outputs.items()}
    for name, output in outputs.items():
        assert QUESTION not in output and ANSWER not in output, name
    bot_events = {line["event"]: line for line in parsed["bot"]}
    # gunicorn's own lines, JSON like the rest (they were "[date] [pid] [INFO] Listening at: ...").
    assert any(e.startswith("Listening at: http://127.0.0.1:") for e in bot_events)
    assert bot_events["Listening at: " + base_url + f" ({bot.pid})"]["logger"] == "gunicorn.error"
    # One line per event: the bot logs the question itself and hands the answer on; a worker stores the pair.
    handed_on = {line["message_ts"]: line for line in parsed["bot"] if line["event"] == "event handed on"}
    assert set(handed_on) == {question["ts"], answer["ts"]}  # the bot logs no message itself: a worker does
    assert (handed_on[answer["ts"]]["channel"], handed_on[answer["ts"]]["message_ts"]) == ("C_SUPPORT", answer["ts"])
    assert handed_on[answer["ts"]]["event_id"] and handed_on[answer["ts"]]["task_id"]
    captured = next(line for line in parsed["worker"] if line["event"] == "answer captured")
    assert (captured["channel"], captured["message_ts"]) == ("C_SUPPORT", answer["ts"]) and captured["pair_id"]
    settled = next(line for line in parsed["worker"] if line["event"] == "pair settled")
    assert (settled["channel"], settled["message_ts"], settled["pair_id"]) == (
        "C_SUPPORT",
        answer["ts"],
        captured["pair_id"],
    )
    worker_events = [line["event"] for line in parsed["worker"]]
    assert "worker: Warm shutdown (MainProcess)" in worker_events  # printed by Celery itself, now JSON
    assert not any("-------------- celery@" in output for output in outputs.values())  # no banner
    assert any(line["event"] == "beat: Starting..." for line in parsed["beat"])
