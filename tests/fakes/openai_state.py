"""The fake OpenAI server's state: how it is told to behave (`Behavior`), what it served, the faults it draws, and
its prompt cache (as OpenAI's: see tests/fakes/openai_server.py)."""

from __future__ import annotations

import hashlib
import random
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import asdict, dataclass
from typing import Any

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
    server_kind: str = "openai"  # which OpenAI-compatible server to answer as (tests/fakes/openai_compat.py)
    embeddings: bool = True  # False: `/v1/embeddings` answers 404, as a chat-only server (llama.cpp's) does
    echo_input: bool = False  # an error's message repeats the input it was sent, as some providers' validation does
    # The first N topic naming prompts are answered with `bad_name` (a name that fails topics.naming's check), as a
    # model sometimes answers a letter, an ID it saw or nothing; the others with the usual name.
    bad_names_first: int = 0
    bad_name: str = "A"


class State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.behavior = Behavior()
        self.random = random.Random()
        self.reply: Reply | None = None
        self.requests: list[dict] = []
        self.embedding_requests: list[dict] = []  # the bodies of `/v1/embeddings` requests
        self.embedding_authorizations: list[str | None] = []  # their Authorization headers, in the same order
        self.statuses: Counter[int] = Counter()
        self.faults_served: Counter[str] = Counter()  # which faults were drawn, by kind
        self.request_times: list[float] = []  # time.monotonic() at each completion's arrival
        self.forced_faults = 0  # how many of behavior.fault_first have been served
        self.sampled_faults = 0  # how many of behavior.sampled_fault_first have been served
        self.bad_names = 0  # how many of behavior.bad_names_first have been served
        self.handler_seconds: list[float] = []  # time spent answering each completion, injected latency included
        self.prompt_cache: set[bytes] = set()  # digests of the prompt beginnings seen (see prefix_digests)
        self.in_flight = self.most_in_flight = 0  # completions being answered now, and the most ever at once
        self.generating = threading.Lock()  # held while answering, by a server kind that serves one at a time

    @contextmanager
    def answering(self, one_at_a_time: bool) -> Iterator[None]:
        """Count a completion in flight from its arrival; a one-at-a-time server then queues it for its turn."""
        with self.lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            with self.generating if one_at_a_time else nullcontext():
                yield
        finally:
            with self.lock:
                self.in_flight -= 1

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
            self.bad_names = 0

    def draw_sampled_fault(self) -> bool:
        with self.lock:
            if self.sampled_faults >= self.behavior.sampled_fault_first:
                return False
            self.sampled_faults += 1
            return True

    def draw_bad_name(self) -> str | None:
        """The bad name to answer a naming prompt with, while `bad_names_first` are not all served."""
        with self.lock:
            if self.bad_names >= self.behavior.bad_names_first:
                return None
            self.bad_names += 1
            return self.behavior.bad_name

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
        self.embedding_requests.clear()
        self.embedding_authorizations.clear()
        self.most_in_flight = self.in_flight
