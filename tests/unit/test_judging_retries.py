"""How judge_pair counts its LLM retries apart from Celery's own (database) retries: a pure rule."""

from __future__ import annotations


def test_llm_retries_are_counted_apart_from_celery_retries() -> None:
    from workers.judging.rules import TASK_MAX_RETRIES, may_retry_llm

    # Eight database autoretries (Celery's request.retries) before the LLM failed: all six LLM retries remain.
    assert all(may_retry_llm(attempts, 6, task_retries=8 + attempts) for attempts in range(6))
    assert not may_retry_llm(6, 6, task_retries=8 + 6)  # the seventh failure is the last
    assert not may_retry_llm(0, 0, task_retries=0)
    # Celery's own bound leaves room for the most LLM retries after ten database retries...
    assert all(may_retry_llm(attempts, 10, task_retries=10 + attempts) for attempts in range(10))
    # ...and past it the LLM error is stored (given up on), never left to Celery to fail the task with.
    assert not may_retry_llm(2, 10, task_retries=TASK_MAX_RETRIES)
