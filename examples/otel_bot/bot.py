"""A support bot instrumented with OpenTelemetry: the openai-v2 instrumentation records each LLM call as a GenAI
chat span (the question and the answer in `gen_ai.input.messages` / `gen_ai.output.messages`), and the OTLP/HTTP
exporter sends the spans to relmon's `/v1/traces`, which judges the answers like captured ones. Where it goes and
with which token is the exporter's standard settings (settings.env): nothing relmon-specific in the code.

Run: `set -a; . ./settings.env; set +a; python bot.py` (Socket Mode: SLACK_BOT_TOKEN, SLACK_APP_TOKEN)."""

from __future__ import annotations

import os

from openai import OpenAI
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from slack_bolt import App

INSTRUCTIONS = "You are the support bot of Acme. Answer briefly and say when you do not know."


def setup_tracing() -> None:
    """Spans to OTEL_EXPORTER_OTLP_TRACES_ENDPOINT with OTEL_EXPORTER_OTLP_TRACES_HEADERS (the exporter reads both);
    the service is OTEL_SERVICE_NAME (the resource reads it)."""
    provider = TracerProvider(resource=Resource.create())
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    OpenAIInstrumentor().instrument()  # after this, every chat.completions call is a span


def create_app() -> App:
    app, llm = App(token=os.environ["SLACK_BOT_TOKEN"]), OpenAI()
    tracer = trace.get_tracer("acme.support_bot")

    @app.event("app_mention")
    @app.event("message")
    def answer(event, say) -> None:
        if event.get("subtype") or event.get("bot_id") or not event.get("text"):
            return
        if event["type"] == "message" and event.get("channel_type") != "im":
            return  # in channels the bot answers mentions only
        thread_ts = event.get("thread_ts") or event["ts"]
        # The conversation's id on the turn's span: relmon groups the turns of one conversation by it.
        with tracer.start_as_current_span("support_turn") as span:
            span.set_attribute("gen_ai.conversation.id", f"{event['channel']}/{thread_ts}")
            span.set_attribute("enduser.id", event.get("user", ""))
            reply = llm.chat.completions.create(
                model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
                messages=[{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": event["text"]}],
            )
            say(text=reply.choices[0].message.content or "Sorry, I have no answer.", thread_ts=thread_ts)

    return app


if __name__ == "__main__":
    from slack_bolt.adapter.socket_mode import SocketModeHandler

    setup_tracing()
    SocketModeHandler(create_app(), os.environ["SLACK_APP_TOKEN"]).start()
