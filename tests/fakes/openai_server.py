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
  `sampled_disputes` (every sampled call grades highest), `served_model` (the
  `model` the response names, as OpenAI answers "gpt-4o-mini-2024-07-18" for "gpt-4o-mini"), `quote_answer` (the
  reply quotes the answer it judged before its verdict, as real judges often do: in the reasoning, or as prose
  before the JSON or the rating when the reply is not structured), and a required API key.
- `GET /_admin/stats`: request count, counts per answered status, counts per fault served (a timeout fault's
  late 200 is counted both ways), and the total time spent answering completions (injected latency included;
  benches subtract it). `POST /_admin/reset` clears them. `.request_times` has when each completion arrived.

Run it alone: `python -m tests.fakes.openai_server --port 8765 --latency-ms 500`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from http.server import ThreadingHTTPServer
from typing import Any

from tests.fakes.background import BackgroundServer, QuietHandler
from tests.fakes.openai_batches import FakeBatches

NO_DOCUMENT = "No document seems to precisely answer your question"
FAULTS = ("429", "500", "timeout", "garbage")
GARBAGE = '<<<%%% the model lost its train of thought ~~~ {"score": ## >>>'

CHARS_PER_TOKEN = 4  # how this fake counts tokens, in usage and in its prompt cache alike
CACHE_MIN_TOKENS = 1024  # OpenAI's prompt caching starts at 1,024 tokens...
CACHE_STEP_TOKENS = 128  # ...and grows in steps of 128

Reply = Callable[[dict], "str | None"]


def tokens(text: str) -> int:
    return len(text) // CHARS_PER_TOKEN


def prefix_digests(model: str, prompt: str) -> list[bytes]:
    """One digest per cacheable beginning of the prompt (1,024 tokens, 1,152, 1,280, ...), shortest first."""
    digest = hashlib.sha1(model.encode("utf-8") + b"\0")
    out: list[bytes] = []
    done = 0
    for size in range(CACHE_MIN_TOKENS, tokens(prompt) + 1, CACHE_STEP_TOKENS):
        end = size * CHARS_PER_TOKEN
        digest.update(prompt[done:end].encode("utf-8"))
        done = end
        out.append(digest.copy().digest())
    return out


@dataclass
class Behavior:
    latency_ms: float = 0.0
    fault_rate: float = 0.0
    faults: tuple[str, ...] = FAULTS
    reject_response_format: bool = False
    seed: int | None = None
    timeout_seconds: float = 5.0  # how long a "timeout" fault sleeps: make it longer than the client's timeout
    retry_after_seconds: float = 0.1
    fault_first: int = 0  # the first N completions after this behaviour is set are faults, whatever fault_rate says
    always_status: int | None = None  # answer every completion with this error status (401, 403, 404, 400...)
    api_key: str | None = None  # when set, any other bearer token gets 401
    sampled_status: int | None = None  # answer every sampled completion (temperature > 0) with this error status
    sampled_fault_first: int = 0  # the first N sampled completions after this behaviour is set answer 500
    sampled_disputes: bool = False  # every sampled completion grades highest
    served_model: str | None = None  # the model the response names (default: the one asked for)
    quote_answer: bool = False  # the reply quotes the judged answer before its verdict


# Default scoring ---------------------------------------------------------------------------------------------


def _grade_text(text: str, low: int, middle: int, high: int, *, sampled: bool = False, disputes: bool = False) -> int:
    lowered = text.lower()
    if sampled and (disputes or "wobbly" in lowered):
        return high
    if "wobbly" in lowered:
        return low
    if "offtopic" in lowered:
        return low
    if "partial" in lowered:
        return middle
    return high


def _between(text: str, start: str, end: str | None) -> str | None:
    at = text.find(start)
    if at == -1:
        return None
    begin = at + len(start)
    stop = text.rfind(end) if end else -1
    return text[begin : stop if stop >= begin else len(text)].strip()


_OPENING = re.compile(r"<<<BEGIN \w+ ([0-9a-f]{16})>>>\n")


def delimited_field(prompt: str, name: str) -> str | None:
    """The text of field `name` in a delimited prompt, read as a judge is told to: the first opening line after
    the instructions gives the tag; the field runs from its own opening line to its own END line. None when the
    prompt has no delimiters (or not this field)."""
    first = _OPENING.search(prompt)
    if first is None:
        return None
    tag = first.group(1)
    begin = prompt.find(f"<<<BEGIN {name} {tag}>>>\n")
    if begin == -1:
        return None
    begin += len(f"<<<BEGIN {name} {tag}>>>\n")
    end = prompt.find(f"\n<<<END {name} {tag}>>>", begin)
    return prompt[begin:end] if end != -1 else None


def prompt_text(body: dict) -> str:
    parts = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(item.get("text", "")) for item in content if isinstance(item, dict))
    return "\n".join(parts)


# How each seed prompt opens: the earliest one in the prompt says which judge asks (a heading of another seed
# quoted inside the texts to judge comes later, so it cannot pass for it).
_SEED_OPENINGS = {
    "relevancy": "You are an expert evaluation system specialized in measuring **Answer Relevancy**.",
    "correctness": "Please act as an impartial judge and evaluate the quality of the response",
    "grounded": "Task: Grounded Question Answering",
}


def seed_kind(prompt: str) -> str | None:
    found = {kind: prompt.find(opening) for kind, opening in _SEED_OPENINGS.items()}
    found = {kind: at for kind, at in found.items() if at != -1}
    return min(found, key=found.__getitem__) if found else None


def is_sampled(body: dict) -> bool:
    """A request sampled above temperature 0: a second opinion."""
    try:
        return float(body.get("temperature") or 0) > 0
    except (TypeError, ValueError):
        return False


def default_reply(body: dict, *, disputes: bool = False, quote_answer: bool = False) -> str:
    """A realistic judge reply graded from the answer text (see the module docstring)."""
    prompt = prompt_text(body)
    user = str((body.get("messages") or [{}])[-1].get("content") or "")
    sampled = is_sampled(body)

    def _grade(text: str, low: int, middle: int, high: int) -> int:
        return _grade_text(text, low, middle, high, sampled=sampled, disputes=disputes)

    structured = _json_schema(body) is not None
    kind = seed_kind(prompt)
    if kind == "relevancy":
        answer = delimited_field(user, "response")
        if answer is None:
            answer = _between(prompt, "### RESPONSE:", "\nOutput only the JSON object described above") or ""
        score = _grade(answer, 0, 2, 4)
        quoted = f"The response says: {answer} " if quote_answer else ""
        reasoning = f"{quoted}The response is graded {score} for relevancy."
        payload = json.dumps({"score": score, "reasoning": reasoning})
        if structured:
            return payload
        return f"{quoted}\n\n```json\n{payload}\n```" if quote_answer else f"```json\n{payload}\n```"
    if kind == "correctness":
        answer = delimited_field(user, "generated_answer")
        if answer is None:
            answer = _between(prompt, "ASSISTANT'S ANSWER:", None) or ""
        rating = _grade(answer, 0, 1, 2)
        quoted = f"The assistant's answer reads:\n{answer}\n\n" if quote_answer else ""
        return f"{quoted}The assistant's answer was compared with the reference answer.\n\nThe rating is: [[{rating}]]"
    if kind == "grounded":
        answer = delimited_field(user, "actual_output")
        if answer is None:
            answer = _between(prompt, "Answer 2:", "\n[/TO EVALUATE]") or ""
        reference = delimited_field(user, "expected_output")
        if reference is None:
            reference = _between(prompt, "Answer 1:", "\nAnswer 2:") or ""

        def grade(text: str) -> dict:
            no_document = text.startswith(NO_DOCUMENT)
            return {
                "answer_affirms_no_document_answers": no_document,
                "answer_relevancy_justification": "No document answers it." if no_document else "Graded by topic.",
                "answer_relevancy": None if no_document else _grade(text, 1, 3, 5),
            }

        graded = {"answer_1": grade(reference), "answer_2": grade(answer)}
        if quote_answer:
            graded["answer_2"]["answer_relevancy_justification"] = f"Answer 2 says: {answer}"
        payload = json.dumps(graded, indent=4)
        if structured:
            return payload
        quoted = f"Answer 2 reads:\n{answer}\n\n" if quote_answer else ""
        return f"{quoted}Here is my evaluation:\n{payload}\nI hope this helps."
    schema = _json_schema(body)
    if schema is not None:
        return json.dumps(_instance(schema, schema))
    return "I am a fake language model."


def _json_schema(body: dict) -> dict | None:
    response_format = body.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
        return (response_format.get("json_schema") or {}).get("schema") or {}
    return None


def _instance(schema: dict, root: dict) -> Any:
    """A minimal value that fits a JSON schema (for schemas this fake does not know)."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return _instance(root.get("$defs", {}).get(name, {}), root)
    if "anyOf" in schema:
        return _instance(schema["anyOf"][0], root)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0]
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object":
        return {name: _instance(sub, root) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        return []
    if kind == "integer":
        return int(schema.get("minimum", 0))
    if kind == "number":
        return float(schema.get("minimum", 0))
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return ""


# The server -------------------------------------------------------------------------------------------------


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.behavior = Behavior()
        self.random = random.Random()
        self.reply: Reply | None = None
        self.requests: list[dict] = []
        self.statuses: Counter[int] = Counter()
        self.faults_served: Counter[str] = Counter()  # which faults were drawn, by kind
        self.request_times: list[float] = []  # time.monotonic() at each completion's arrival
        self.forced_faults = 0  # how many of behavior.fault_first have been served
        self.sampled_faults = 0  # how many of behavior.sampled_fault_first have been served
        self.handler_seconds: list[float] = []  # time spent answering each completion, injected latency included
        self.prompt_cache: set[bytes] = set()  # digests of the prompt beginnings seen (see prefix_digests)

    def cached_tokens(self, model: str, prompt: str) -> int:
        """The tokens of the longest cacheable beginning of `prompt` seen before; then remember this prompt's."""
        digests = prefix_digests(model, prompt)
        with self.lock:
            hits = 0
            for digest in digests:  # beginnings nest: the first one never seen ends the cached part
                if digest not in self.prompt_cache:
                    break
                hits += 1
            self.prompt_cache.update(digests)
        return CACHE_MIN_TOKENS + (hits - 1) * CACHE_STEP_TOKENS if hits else 0

    def configure(self, **fields: Any) -> None:
        with self.lock:
            if "faults" in fields:
                fields["faults"] = tuple(str(fault) for fault in fields["faults"])
                unknown = set(fields["faults"]) - set(FAULTS)
                if unknown:
                    raise ValueError(f"unknown faults {sorted(unknown)}; choose from {FAULTS}")
            self.behavior = Behavior(**{**asdict(Behavior()), **fields})
            self.random = random.Random(self.behavior.seed)
            self.forced_faults = 0
            self.sampled_faults = 0

    def draw_sampled_fault(self) -> bool:
        with self.lock:
            if self.sampled_faults >= self.behavior.sampled_fault_first:
                return False
            self.sampled_faults += 1
            return True

    def draw_fault(self) -> str | None:
        with self.lock:
            behavior = self.behavior
            fault = None
            if self.forced_faults < behavior.fault_first:
                self.forced_faults += 1
                fault = self.random.choice(behavior.faults)
            elif behavior.fault_rate > 0 and self.random.random() < behavior.fault_rate:
                fault = self.random.choice(behavior.faults)
            if fault is not None:
                self.faults_served[fault] += 1
            return fault

    def clear(self) -> None:
        """Forget what was served (call with the lock held)."""
        self.requests.clear()
        self.statuses.clear()
        self.faults_served.clear()
        self.request_times.clear()
        self.handler_seconds.clear()


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
        else:
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})

    def _complete(self, body: dict) -> int:
        state = self.server.state
        with state.lock:
            state.requests.append(body)
            state.request_times.append(time.monotonic())
            behavior = state.behavior
        if behavior.latency_ms:
            time.sleep(behavior.latency_ms / 1000)
        if behavior.api_key is not None and self.headers.get("Authorization") != f"Bearer {behavior.api_key}":
            return self._error(401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
        if behavior.always_status:
            return self._error(behavior.always_status, f"fake error {behavior.always_status}", "fake_error", None)
        if behavior.sampled_status and is_sampled(body):
            status = behavior.sampled_status
            return self._error(status, f"fake error {status} (sampled call)", "fake_error", None)
        if is_sampled(body) and state.draw_sampled_fault():
            return self._error(500, "fake error 500 (a sampled call, once)", "fake_error", None)
        if behavior.reject_response_format and body.get("response_format") is not None:
            return self._error(
                400,
                "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.",
                "invalid_request_error",
                None,
                param="response_format",
            )
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


def completion_for(state: _State, body: dict, content: str | None = None) -> dict:
    """The chat completion the fake answers to `body` (online, or one line of a batch)."""
    with state.lock:
        custom = state.reply
        behavior = state.behavior
    if content is None and custom is not None:
        content = custom(body)
    if content is None:
        content = default_reply(body, disputes=behavior.sampled_disputes, quote_answer=behavior.quote_answer)
    prompt = prompt_text(body)
    model = behavior.served_model or str(body.get("model") or "fake-judge")
    cached = state.cached_tokens(model, prompt)
    return {
        "id": f"chatcmpl-fake{len(state.requests)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": tokens(prompt),
            "completion_tokens": tokens(content),
            "total_tokens": tokens(prompt) + tokens(content),
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        },
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a sleeping "timeout" handler must not keep the process alive
    block_on_close = False
    request_queue_size = 256  # many SDK threads connect at once
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, _Handler)
        self.state = _State()
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

    def set_behavior(
        self,
        latency_ms: float = 0.0,
        fault_rate: float = 0.0,
        faults: Iterable[str] = FAULTS,
        reject_response_format: bool = False,
        seed: int | None = None,
        timeout_seconds: float = 5.0,
        retry_after_seconds: float = 0.1,
        always_status: int | None = None,
        api_key: str | None = None,
        fault_first: int = 0,
        sampled_status: int | None = None,
        sampled_fault_first: int = 0,
        sampled_disputes: bool = False,
        served_model: str | None = None,
        quote_answer: bool = False,
    ) -> None:
        self._server.state.configure(
            quote_answer=quote_answer,
            sampled_status=sampled_status,
            sampled_fault_first=sampled_fault_first,
            sampled_disputes=sampled_disputes,
            served_model=served_model,
            latency_ms=latency_ms,
            fault_rate=fault_rate,
            faults=tuple(faults),
            reject_response_format=reject_response_format,
            seed=seed,
            timeout_seconds=timeout_seconds,
            retry_after_seconds=retry_after_seconds,
            always_status=always_status,
            api_key=api_key,
            fault_first=fault_first,
        )

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
    args = parser.parse_args(argv)
    fake = FakeOpenAI(
        port=args.port,
        latency_ms=args.latency_ms,
        fault_rate=args.fault_rate,
        faults=[fault for fault in args.faults.split(",") if fault],
        reject_response_format=args.reject_response_format,
        seed=args.seed,
        timeout_seconds=args.timeout_seconds,
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
