"""A support bot instrumented as bots are, for tests and the bench: the real openai SDK calls an OpenAI-compatible
server (tests/fakes/openai_server.py), a published instrumentation records the calls as spans, and the SDK's
OTLP/HTTP exporter sends them where the standard OTEL_* variables say (relmon's POST /v1/traces).

    python -m tests.otel_app --instrumentation openai-v2 --openai-url URL "question" ["question" ...]

Each question is one turn of one conversation (the earlier turns sent as history, as a chat bot does), answered
under a root span `answer`; with --documents, a RETRIEVER span (OpenInference's conventions, as LlamaIndex's or
LangChain's instrumentation records one) precedes the call in the same trace. Prints each answer's trace id (hex),
one a line. Run in a process of its own: instrumentations patch the openai module for the whole process.

openai-v2 records content on spans with OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental and
OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY (or SPAN_AND_EVENT): `gen_ai.input.messages`."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import openai
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

ROOT = Path(__file__).resolve().parents[1]


def run_app(
    bot_url: str,
    openai_url: str,
    token: str,
    instrumentation: str,
    *questions: str,
    documents: list | None = None,
    resource: str = "service.version=2.3.1",
) -> list[str]:
    """This app in a process of its own, exporting to the relmon bot at `bot_url` as the OTEL_* variables of
    docs/ingest.md say: the trace ids of its answers."""
    env = {
        **{key: value for key, value in os.environ.items() if not key.startswith("OTEL_")},
        "PYTHONPATH": str(ROOT),
        "OTEL_SERVICE_NAME": "helpdesk",
        "OTEL_RESOURCE_ATTRIBUTES": resource,
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{bot_url}/v1/traces",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS": f"Authorization=Bearer%20{token}",
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
    }
    command = [sys.executable, "-m", "tests.otel_app", "--instrumentation", instrumentation, "--openai-url", openai_url]
    if documents:
        command += ["--documents", json.dumps(documents)]
    done = subprocess.run([*command, *questions], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"tests.otel_app failed: {done.stderr[-2000:]}")
    return done.stdout.split()


def instrument(name: str, provider: TracerProvider) -> None:
    if name == "openai-v2":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    else:
        from openinference.instrumentation.openai import OpenAIInstrumentor
    OpenAIInstrumentor().instrument(tracer_provider=provider)


def retrieve(tracer: trace.Tracer, question: str, documents: list[dict]) -> None:
    with tracer.start_as_current_span("retrieve") as span:
        span.set_attribute("openinference.span.kind", "RETRIEVER")
        span.set_attribute("input.value", question)
        for n, document in enumerate(documents):
            span.set_attribute(f"retrieval.documents.{n}.document.content", document["text"])
            span.set_attribute(f"retrieval.documents.{n}.document.id", document["id"])
            span.set_attribute(f"retrieval.documents.{n}.document.metadata", json.dumps({"source": document["source"]}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--instrumentation", choices=["openai-v2", "openinference"], required=True)
    parser.add_argument("--openai-url", required=True)
    parser.add_argument("--documents", default="", help="JSON list of {text, id, source}")
    parser.add_argument("questions", nargs="+")
    args = parser.parse_args(argv)
    # The resource from OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES; the exporter from OTEL_EXPORTER_OTLP_TRACES_*.
    provider = TracerProvider(resource=Resource.create())
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    instrument(args.instrumentation, provider)
    tracer = provider.get_tracer("support-bot")
    client = openai.OpenAI(base_url=args.openai_url, api_key="sk-test")
    documents = json.loads(args.documents) if args.documents else []
    history = [{"role": "system", "content": "You are the helpdesk bot."}]
    for question in args.questions:
        history.append({"role": "user", "content": question})
        with tracer.start_as_current_span("answer") as root:
            if documents:
                retrieve(tracer, question, documents)
            reply = client.chat.completions.create(model="gpt-4o-mini", messages=history)
            print(format(root.get_span_context().trace_id, "032x"), flush=True)
        history.append({"role": "assistant", "content": reply.choices[0].message.content})
    provider.shutdown()  # flushes the batch to relmon
    return 0


if __name__ == "__main__":
    sys.exit(main())
