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
