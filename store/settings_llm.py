"""The settings of how relmon calls its LLM endpoint, beyond which one (store.settings): `Settings` inherits them."""

from __future__ import annotations

from pydantic import AliasChoices, BaseModel, Field


class LLMCallFields(BaseModel):
    # Calls in flight to the LLM endpoint, per process (each `relmon worker` process has its own bound). Unset:
    # sized per endpoint kind (common.llm.default_concurrency): 1 for a local server on its default port
    # (Ollama, LM Studio, llama.cpp, llama-cpp-python), else RELMON_WORKER_CONCURRENCY (a hosted API).
    llm_concurrency: int | None = Field(
        None, ge=1, le=1000, validation_alias=AliasChoices("RELMON_LLM_CONCURRENCY", "relmon_llm_concurrency")
    )
    # The LLM endpoint down (its failures outlasted a judging task's retries): answers wait, and the endpoint is
    # probed with the oldest one after this many seconds, the wait doubling up to five minutes
    # (workers.judging.outage).
    llm_probe_seconds: float = Field(
        30.0, gt=0, le=3600, validation_alias=AliasChoices("RELMON_LLM_PROBE_SECONDS", "relmon_llm_probe_seconds")
    )
    # Once it answers again, the answers that waited are judged oldest first at most this many a minute, so the
    # backlog does not trip its rate limit.
    llm_resume_per_minute: float = Field(
        60.0,
        gt=0,
        le=100_000,
        validation_alias=AliasChoices("RELMON_LLM_RESUME_PER_MINUTE", "relmon_llm_resume_per_minute"),
    )
