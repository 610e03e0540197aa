"""Where verdicts go besides Slack: the support bot's own traces (`workers.traces`), a fields class
`store.settings.Settings` inherits. Everything unset: nothing is sent."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, BaseModel, Field, SecretStr


def _env(name: str) -> dict:
    return {"validation_alias": AliasChoices(name, name.lower())}


class TraceSettings(BaseModel):
    # Where an answer's trace ID comes from: the bot message's Slack metadata (at RELMON_TRACE_ID_KEY), or derived
    # from the channel and the message's ts as Langfuse's create_trace_id(seed="CHANNEL:TS") derives it.
    trace_id_from: Literal["metadata", "slack_ts"] = Field("metadata", **_env("RELMON_TRACE_ID_FROM"))
    trace_id_key: str = Field("event_payload.trace_id", min_length=1, **_env("RELMON_TRACE_ID_KEY"))
    # Langfuse: scores on the bot's traces. Off unless the host and both keys are set.
    langfuse_host: str | None = Field(None, **_env("RELMON_LANGFUSE_HOST"))
    langfuse_public_key: str | None = Field(None, **_env("RELMON_LANGFUSE_PUBLIC_KEY"))
    langfuse_secret_key: SecretStr | None = Field(None, **_env("RELMON_LANGFUSE_SECRET_KEY"))
    # OpenTelemetry: `gen_ai.evaluation.result` events over OTLP/HTTP to this endpoint (the standard variable; the
    # exporter reads the other OTEL_EXPORTER_OTLP_* variables itself: headers, timeout, certificates).
    otlp_endpoint: str | None = Field(None, **_env("OTEL_EXPORTER_OTLP_ENDPOINT"))
    # Their form: log records (the convention's event form), or spans in the bot's trace carrying the event, under
    # the span it names at RELMON_SPAN_ID_KEY, for backends that read traces only (Phoenix, Jaeger, Tempo).
    otlp_events_as: Literal["logs", "spans"] = Field("logs", **_env("RELMON_OTLP_EVENTS_AS"))
    # Phoenix: span annotations on the bot's traces. Off unless the URL is set; the key only where Phoenix has auth
    # on. An annotation goes on the span the bot names in its metadata (RELMON_SPAN_ID_KEY), else on the trace's
    # root span, looked up in the project (workers.phoenix_annotations says why).
    phoenix_url: str | None = Field(None, **_env("RELMON_PHOENIX_URL"))
    phoenix_api_key: SecretStr | None = Field(None, **_env("RELMON_PHOENIX_API_KEY"))
    phoenix_project: str = Field("default", min_length=1, **_env("RELMON_PHOENIX_PROJECT"))
    span_id_key: str = Field("event_payload.span_id", min_length=1, **_env("RELMON_SPAN_ID_KEY"))
    trace_send_retries: int = Field(5, ge=0, **_env("RELMON_TRACE_SEND_RETRIES"))
    # The judge's reasoning beside a score (Langfuse's comment, Phoenix's explanation, the OTLP event's) quotes the
    # conversation: by default only for public channels not shared with another organisation (`public`); `all`
    # sends it for private channels, DMs and Slack Connect channels too (the trace tool's readers may read them).
    traces_reasoning: Literal["public", "all"] = Field("public", **_env("RELMON_TRACES_REASONING"))

    @property
    def langfuse_enabled(self) -> bool:
        return bool(self.langfuse_host and self.langfuse_public_key and self.langfuse_secret_key)
