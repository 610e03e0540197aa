"""Judging's log lines in a worker's runtime (judge_pair run in this process on a real database and the fake LLM):
they name the pair's channel and answer ts, never its texts."""

from __future__ import annotations

from tests.fakes.openai_server import FakeOpenAI
from tests.log_capture import ANSWER, OPENAI_KEY, QUESTION, lines


def test_judgings_log_lines_name_the_pairs_message_never_its_texts(
    capture_logs, database, settings_for, runtime_for
) -> None:
    """judge_pair's "retrying" and "budget spent" lines name the pair's channel and answer ts, never its texts."""
    from tests.pipeline_helpers import add_pairs
    from workers.tasks.judging import judge_pair

    stream = capture_logs()
    with FakeOpenAI() as fake_openai:
        settings = settings_for(
            openai_base_url=fake_openai.base_url,
            openai_api_key=OPENAI_KEY,
            llm_max_retries=1,
            retry_base_seconds=0.01,
            daily_budget=1,
        )
        runtime_for(settings)
        fake_openai.set_behavior(fault_first=1, faults=["500"], retry_after_seconds=0)
        (first,) = add_pairs(database, 1, channel="C_LOGS", question=QUESTION, answer=ANSWER)
        (second,) = add_pairs(database, 1, channel="C_LOGS", start=1)  # other texts: no cache hit
        judge_pair.apply(args=[first]).get()  # fails once, retried, judged: the day's one judgment
        judge_pair.apply(args=[second]).get()  # the budget is spent
    events = {line["event"]: line for line in lines(stream)}
    retrying = events["LLM transient error, retrying"]
    skipped = events["daily budget spent: pair skipped"]
    assert (retrying["channel"], retrying["message_ts"], retrying["pair_id"]) == ("C_LOGS", "1700000000.000000", first)
    assert (retrying["judge"], retrying["retry"]) == ("relevancy", 1)
    assert (skipped["channel"], skipped["message_ts"], skipped["pair_id"]) == ("C_LOGS", "1700000000.000001", second)
    assert QUESTION not in stream.getvalue() and ANSWER not in stream.getvalue()
