"""A local OpenAI-compatible chat completions server for tests and benches. The real `openai` SDK talks to it
over HTTP (point `base_url` / OPENAI_BASE_URL at `.base_url`).

- `POST /v1/chat/completions`: honours `response_format` (json_schema → JSON content that fits the schema),
  fills `usage` (characters // 4) and `model`.
- Prompt caching as OpenAI does it: `usage.prompt_tokens_details.cached_tokens` is the longest beginning of
  the prompt (the messages' texts, counted like `prompt_tokens`), of at least 1,024 tokens and in 128-token
  steps, that this fake has already seen in an earlier request for the same model. `reset` keeps that memory
  (a provider's cache does not forget when the counters are reset); `forget_prompts` clears it.
- Default replies follow the answer text, so any test can steer a score: the seed prompt's opening line says
  which judge asks, then the text after "### RESPONSE:"
  (relevancy), "ASSISTANT'S ANSWER:" (correctness) or "Answer 2:" (grounded) scores lowest if it contains
  "offtopic", middling if it contains "partial", highest otherwise; a grounded answer that starts with
  "No document seems to precisely answer your question" is graded null. A prompt whose texts sit between
  delimiter lines (`<<<BEGIN name TAG>>>` … `<<<END name TAG>>>`, as judges/prompts.py writes them) is read as
  the system message tells a judge to: the tag of the first such line holds for every text, and a text ends
  only at its own END line, whatever look-alikes it holds. A second opinion (a request sampled
  at a temperature above 0) grades the same, except that an answer containing "wobbly" scores lowest at
  temperature 0 and highest when sampled: the judge changes its mind.
- Behaviour (in process with `set_behavior`, or `POST /_admin/behavior` with the same fields as JSON):
  latency, a seeded fault rate drawing from 429 (with Retry-After), 500, timeout (sleeps past the client's
  timeout) and garbage (200 with unreadable content), `fault_first` (the first N completions are faults whatever
  the rate), rejection of `response_format` (400), a fixed error
  status for every call (`always_status`, e.g. 401), the same for sampled calls only (`sampled_status`: the
  second opinion's LLM is down), `sampled_fault_first` (the first N sampled calls answer 500, then it is back),
  `sampled_disputes` (every sampled call grades highest), `echo_input` (an error's message repeats the input it was
  sent: the prompt, or the texts to embed), `served_model` (the
  `model` the response names, as OpenAI answers "gpt-4o-mini-2024-07-18" for "gpt-4o-mini"), `quote_answer` (the
  reply quotes the answer it judged before its verdict, as real judges often do: in the reasoning, or as prose
  before the JSON or the rating when the reply is free text), and a required API key; `server_kind` answers as
  another OpenAI-compatible server does (tests/fakes/openai_compat.py:
  llama-cpp-python's 500 to json_schema, a proxy's 400 to any response_format, a reasoning model's 400 to
  max_tokens, usage without prompt_tokens_details or none, one request at a time).
- Every reply is cut at the bound the server kind reads (`max_tokens`, `max_completion_tokens`), with
  `finish_reason` "length", as a server cuts a reply that reaches it.
- `POST /v1/embeddings` (tests/fakes/openai_embeddings.py): hashed bag-of-words vectors, base64 or float, usage,
  404 for an unknown model; `embeddings=False` answers 404 as a chat-only server. `.embedding_requests` and
  `.embedding_authorizations` keep each request's body and Authorization header. The topic naming prompt
  (topics.naming) is answered with a name made of its questions' commonest words; `bad_names_first` answers the
  first N naming prompts (the one asked again included) with `bad_name` instead ("A": a name that fails the check).
- `GET /_admin/stats`: request count, counts per answered status, counts per fault served (a timeout fault's
  late 200 is counted both ways), and the total time spent answering completions (injected latency included;
  benches subtract it), and the most completions it was answering at once. `POST /_admin/reset` clears them.
  `.request_times` has when each completion arrived.

Run it alone: `python -m tests.fakes.openai_server --port 8765 --latency-ms 500`.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from dataclasses import asdict, replace
from http.server import ThreadingHTTPServer
from typing import Any

from tests.fakes.background import BackgroundServer, QuietHandler
from tests.fakes.openai_batches import FakeBatches
from tests.fakes.openai_compat import ServerKind, bound_of, kind_named, refusal, shaped_usage
from tests.fakes.openai_embeddings import embeddings_answer, topic_name
from tests.fakes.openai_replies import NO_DOCUMENT, default_reply, is_sampled, prompt_text
from tests.fakes.openai_state import CHARS_PER_TOKEN, FAULTS, GARBAGE, Behavior, Reply, State, tokens

__all__ = ["FAULTS", "GARBAGE", "NO_DOCUMENT", "FakeOpenAI", "default_reply", "prompt_text"]


class _Handler(QuietHandler):  # keep-alive: the SDK pools connections
    # Headers and body leave in one segment, without Nagle: otherwise delayed ACKs add ~40 ms per request.
    disable_nagle_algorithm = True
    wbufsize = 64 * 1024
    server: _Server
    _started: float | None = None  # set while answering a chat completion

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode("utf-8")
        if self._started is not None:  # a completion: count it before the client can see the answer
            state = self.server.state
            with state.lock:
                state.statuses[status] += 1
                state.handler_seconds.append(time.perf_counter() - self._started)
            self._started = None
        try:
            self.send_body(status, data, "application/json", headers)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout): nothing to do
            self.close_connection = True

    def _body(self) -> dict:
        return json.loads(self.read_body() or b"{}")

    def _batch_api(self, method: str) -> bool:
        """The Batch API routes (tests/fakes/openai_batches.py); False when the path is not one of them."""
        batches = self.server.batches
        if not batches.handles(self.path):
            return False
        raw = self.read_body()
        status, payload = batches.answer(method, self.path.rstrip("/"), self.headers.get("Content-Type") or "", raw)
        if isinstance(payload, bytes):
            self.send_body(status, payload, "application/octet-stream")
        else:
            self._send(status, payload)
        return True

    def do_GET(self) -> None:
        state = self.server.state
        if self._batch_api("GET"):
            return
        if self.path.rstrip("/") == "/_admin/stats":
            with state.lock:
                stats = {
                    "requests": len(state.requests),
                    "statuses": {str(code): count for code, count in sorted(state.statuses.items())},
                    "faults": dict(sorted(state.faults_served.items())),
                    "handler_seconds_total": sum(state.handler_seconds),
                    "most_in_flight": state.most_in_flight,
                    "behavior": asdict(state.behavior),
                }
            self._send(200, stats)
        elif self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send(200, {"object": "list", "data": [{"id": "fake-judge", "object": "model", "owned_by": "fake"}]})
        else:
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})

    def do_POST(self) -> None:
        state = self.server.state
        path = self.path.rstrip("/")
        if self._batch_api("POST"):
            return
        try:
            body = self._body()
        except (ValueError, UnicodeDecodeError):
            self._send(400, {"error": {"message": "the body is not JSON", "type": "invalid_request_error"}})
            return
        if path == "/_admin/behavior":
            try:
                state.configure(**body)
            except (TypeError, ValueError) as exc:
                self._send(400, {"error": {"message": str(exc)}})
                return
            self._send(200, {"ok": True, "behavior": asdict(state.behavior)})
        elif path == "/_admin/reset":
            with state.lock:
                state.clear()
            self._send(200, {"ok": True})
        elif path in ("/v1/chat/completions", "/chat/completions"):
            self._started = time.perf_counter()
            self._complete(body)
        elif path in ("/v1/embeddings", "/embeddings"):
            self._embed(body)
        else:
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})

    def _complete(self, body: dict) -> int:
        state = self.server.state
        with state.lock:
            state.requests.append(body)
            state.request_times.append(time.monotonic())
            behavior = state.behavior
        with state.answering(server_kind(behavior).one_at_a_time):
            return self._answer(body, behavior)

    def _answer(self, body: dict, behavior: Behavior) -> int:
        state = self.server.state
        if behavior.latency_ms:
            time.sleep(behavior.latency_ms / 1000)
        if behavior.api_key is not None and self.headers.get("Authorization") != f"Bearer {behavior.api_key}":
            return self._error(401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
        if behavior.always_status:
            status = behavior.always_status
            # As OpenAI does: a rate limit (429) and an overloaded server (503) say when to come back.
            headers = {"Retry-After": str(behavior.retry_after_seconds)} if status in (429, 503) else None
            message = f"fake error {status}" + _echo(behavior, prompt_text(body))
            return self._error(status, message, "fake_error", None, headers=headers)
        if behavior.sampled_status and is_sampled(body):
            status = behavior.sampled_status
            return self._error(status, f"fake error {status} (sampled call)", "fake_error", None)
        if is_sampled(body) and state.draw_sampled_fault():
            return self._error(500, "fake error 500 (a sampled call, once)", "fake_error", None)
        refused = refusal(server_kind(behavior), body)
        if refused is not None:
            self._send(*refused)
            return refused[0]
        fault = state.draw_fault()
        if fault == "429":
            headers = {"Retry-After": str(behavior.retry_after_seconds)}
            return self._error(429, "Rate limit reached", "requests", "rate_limit_exceeded", headers=headers)
        if fault == "500":
            return self._error(500, "The server had an error while processing your request.", "server_error", None)
        if fault == "timeout":
            time.sleep(behavior.timeout_seconds)
        content = GARBAGE if fault == "garbage" else None
        self._send(200, completion_for(state, body, content))
        return 200

    def _embed(self, body: dict) -> int:
        """`POST /v1/embeddings` (tests/fakes/openai_embeddings.py), after the same key and error behaviour."""
        state = self.server.state
        with state.lock:
            state.embedding_requests.append(body)
            state.embedding_authorizations.append(self.headers.get("Authorization"))
            behavior = state.behavior
        echoed = _echo(behavior, _inputs(body))
        if not behavior.embeddings:
            return self._error(404, f"Invalid URL (POST {self.path}){echoed}", "invalid_request_error", None)
        if behavior.api_key is not None and self.headers.get("Authorization") != f"Bearer {behavior.api_key}":
            return self._error(401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
        if behavior.always_status:
            return self._error(
                behavior.always_status, f"fake error {behavior.always_status}{echoed}", "fake_error", None
            )
        status, payload = embeddings_answer(body)
        self._send(status, payload)
        return status

    def _error(
        self,
        status: int,
        message: str,
        kind: str,
        code: str | None,
        *,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> int:
        self._send(status, {"error": {"message": message, "type": kind, "param": param, "code": code}}, headers)
        return status


def _inputs(body: dict) -> str:
    texts = body.get("input")
    return " | ".join(str(text) for text in texts) if isinstance(texts, list) else str(texts or "")


def _echo(behavior: Behavior, sent: str) -> str:
    """What an error message adds when `echo_input` is on: the input it was sent, as a provider's validation error
    may quote it ("Invalid input: ...")."""
    return f": invalid input: {sent[:2000]}" if behavior.echo_input else ""


def completion_for(state: State, body: dict, content: str | None = None) -> dict:
    """The chat completion the fake answers to `body` (online, or one line of a batch)."""
    with state.lock:
        custom = state.reply
        behavior = state.behavior
    if content is None and custom is not None:
        content = custom(body)
    if content is None and topic_name(prompt_text(body)) is not None:
        content = state.draw_bad_name()
    if content is None:
        content = default_reply(body, disputes=behavior.sampled_disputes, quote_answer=behavior.quote_answer)
    server = server_kind(behavior)
    bound, finish = bound_of(server, body), "stop"
    if bound is not None and tokens(content) > bound:  # cut at the bound the server reads
        content, finish = content[: bound * CHARS_PER_TOKEN], "length"
    prompt = prompt_text(body)
    model = behavior.served_model or str(body.get("model") or "fake-judge")
    cached = state.cached_tokens(model, prompt)
    usage = {
        "prompt_tokens": tokens(prompt),
        "completion_tokens": tokens(content),
        "total_tokens": tokens(prompt) + tokens(content),
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
    }
    completion = {
        "id": f"chatcmpl-fake{len(state.requests)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "finish_reason": finish,
                "logprobs": None,
            }
        ],
    }
    shaped = shaped_usage(server, usage)
    if shaped is not None:
        completion["usage"] = shaped
    return completion


def server_kind(behavior: Behavior) -> ServerKind:
    """The kind of server the fake answers as; `reject_response_format` makes it take no response_format."""
    server = kind_named(behavior.server_kind)
    return replace(server, formats=()) if behavior.reject_response_format else server


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a sleeping "timeout" handler must not keep the process alive
    block_on_close = False
    request_queue_size = 256  # many SDK threads connect at once
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, _Handler)
        self.state = State()
        self.batches = FakeBatches(lambda body: completion_for(self.state, body))


class FakeOpenAI(BackgroundServer):
    """The fake server on 127.0.0.1, in a background thread. Use as a context manager."""

    thread_name = "fake-openai"

    def __init__(self, port: int = 0, **behavior: Any) -> None:
        self._server = _Server(("127.0.0.1", port))
        self._thread: threading.Thread | None = None
        if behavior:
            self.set_behavior(**behavior)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[dict]:
        """The JSON bodies of the chat completion requests received so far (a copy)."""
        with self._server.state.lock:
            return list(self._server.state.requests)

    @property
    def embedding_requests(self) -> list[dict]:
        """The JSON bodies of the `/v1/embeddings` requests received so far (a copy)."""
        with self._server.state.lock:
            return list(self._server.state.embedding_requests)

    @property
    def embedding_authorizations(self) -> list[str | None]:
        """The Authorization header of each `/v1/embeddings` request received so far ("Bearer <key>")."""
        with self._server.state.lock:
            return list(self._server.state.embedding_authorizations)

    @property
    def statuses(self) -> dict[int, int]:
        with self._server.state.lock:
            return dict(self._server.state.statuses)

    @property
    def faults_served(self) -> dict[str, int]:
        """How many of each fault kind ("429", "500", "timeout", "garbage") were served."""
        with self._server.state.lock:
            return dict(self._server.state.faults_served)

    @property
    def request_times(self) -> list[float]:
        """time.monotonic() at the arrival of each chat completion request (same clock as the test's)."""
        with self._server.state.lock:
            return list(self._server.state.request_times)

    @property
    def handler_seconds(self) -> list[float]:
        with self._server.state.lock:
            return list(self._server.state.handler_seconds)

    def set_behavior(self, **fields: Any) -> None:
        """Answer as `Behavior(**fields)` says from now on (every field not given is back to its default)."""
        self._server.state.configure(**fields)

    @property
    def batches(self) -> FakeBatches:
        """The Batch API: `.available`, `.outcomes` (one per batch created), `.requests` answered in batches."""
        return self._server.batches

    def set_reply(self, reply: Reply | None) -> None:
        """A custom reply: called with each request body; return the content, or None for the default."""
        with self._server.state.lock:
            self._server.state.reply = reply

    def reset(self) -> None:
        """Clear the counters and the requests kept (not the prompt cache: see `forget_prompts`)."""
        with self._server.state.lock:
            self._server.state.clear()

    def forget_prompts(self) -> None:
        """Empty the prompt cache: the next request of each prompt has no cached tokens."""
        with self._server.state.lock:
            self._server.state.prompt_cache.clear()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A fake OpenAI-compatible chat completions server.")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--fault-rate", type=float, default=0.0)
    parser.add_argument("--faults", default=",".join(FAULTS), help=f"comma-separated, from {','.join(FAULTS)}")
    parser.add_argument("--reject-response-format", action="store_true")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--timeout-seconds", type=float, default=5.0)
    parser.add_argument("--server-kind", default="openai", help="openai, openai-reasoning, llama-cpp-python, proxy")
    args = parser.parse_args(argv)
    fake = FakeOpenAI(
        port=args.port,
        latency_ms=args.latency_ms,
        fault_rate=args.fault_rate,
        faults=[fault for fault in args.faults.split(",") if fault],
        reject_response_format=args.reject_response_format,
        seed=args.seed,
        timeout_seconds=args.timeout_seconds,
        server_kind=args.server_kind,
    )
    print(f"fake OpenAI listening on {fake.base_url}", flush=True)
    try:
        fake._server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        fake._server.server_close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
