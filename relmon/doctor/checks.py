"""The doctor's checks of the settings, Redis, the database and the LLM, and the `Check` line they yield."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from pydantic import BaseModel

from common.telemetry.scrub import mask_url, problem_text
from store.settings import WHERE_TO_GET, Settings, mask

LLM_TIMEOUT_SECONDS = 20.0
REDIS_FIX = "start Redis or correct REDIS_URL (redis://host:6379/0); unset it to use the embedded Redis"
DATABASE_FIX = "start the database or correct DATABASE_URL (postgresql://user:password@host:5432/relmon)"
MIGRATE_FIX = "run `relmon migrate` (relmon run, bot and worker also migrate when they start)"


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # "ok" | "warn" | "FAIL" | "skip"
    detail: str
    fix: str = ""

    @property
    def failed(self) -> bool:
        return self.status == "FAIL"

    @property
    def warned(self) -> bool:
        return self.status == "warn"

    def line(self) -> str:
        text = f"{self.status:<4}  {self.name}: {self.detail}"
        return f"{text}\n        fix: {self.fix}" if self.fix else text


def ok(name: str, detail: str) -> Check:
    return Check(name, "ok", detail)


def fail(name: str, detail: str, fix: str) -> Check:
    return Check(name, "FAIL", detail, fix)


def warn(name: str, detail: str, fix: str = "") -> Check:
    return Check(name, "warn", detail, fix)


def skip(name: str, detail: str) -> Check:
    return Check(name, "skip", detail)


# Settings -----------------------------------------------------------------------------------------------


def check_settings(settings: Settings) -> Iterator[Check]:
    absent = settings.missing()
    if absent:
        for name in absent:
            yield fail("settings", f"{name} is not set", f"set {name} in the environment or .env: {WHERE_TO_GET[name]}")
    else:
        shown = ", ".join(
            f"{env}={mask(settings.secret(attr))}"
            for env, attr in (("SLACK_BOT_TOKEN", "slack_bot_token"), ("OPENAI_API_KEY", "openai_api_key"))
        )
        mode = "Socket Mode" if settings.slack_app_token else "HTTP"
        yield ok("settings", f"required settings present ({shown}; {mode})")
    if settings.channel_rules_file:
        from store.rules import ChannelRules

        try:
            ChannelRules.load(settings.channel_rules_file)
        except Exception as error:  # a YAML or validation error: show it, it names the bad key
            first = str(error).splitlines()[0] if str(error) else type(error).__name__
            yield fail(
                "channel rules",
                f"{settings.channel_rules_file} cannot be used: {first}",
                "fix the file (format: see docs/configuration.md, Per-channel rules)",
            )
        else:
            yield ok("channel rules", f"{settings.channel_rules_file} is valid")


# Redis and the database ---------------------------------------------------------------------------------


def check_redis(settings: Settings) -> Check:
    from common.celery_app import broker_url_for, embedded_socket_path
    from common.embedded_redis import answering

    if not settings.redis_url:
        socket_path = embedded_socket_path(settings)
        if answering(socket_path):
            return ok("redis", f"embedded Redis answers on {socket_path}")
        return ok("redis", f"embedded mode: relmon run / relmon worker start Redis on {socket_path}")
    from common.runtime import redis_client_for

    shown = mask_url(broker_url_for(settings))
    try:
        redis_client_for(settings).ping()
    except Exception as error:
        return fail("redis", f"no answer from {shown} ({type(error).__name__})", REDIS_FIX)
    return ok("redis", f"PING answered by {shown}")


def check_database(settings: Settings) -> Check:
    from store.db import Database, pending_migrations

    url = settings.resolved_database_url
    shown = mask_url(url)
    sqlite_file = settings.data_dir / "relmon.sqlite3"
    if not settings.database_url and not sqlite_file.exists():
        return ok("database", f"SQLite mode: relmon run creates {sqlite_file.resolve()} and its schema")
    database = None
    try:
        database = Database(url, pool_size=1)  # inside: a malformed URL fails here
        pending = pending_migrations(database.engine)
    except Exception as error:
        return fail("database", f"cannot connect to {shown}: {problem_text(error)}", DATABASE_FIX)
    finally:
        if database is not None:
            database.dispose()
    if pending:
        return fail("database", f"{shown}: {len(pending)} migration(s) not applied ({', '.join(pending)})", MIGRATE_FIX)
    return ok("database", f"{shown}: schema up to date")


# The LLM ------------------------------------------------------------------------------------------------


class _DoctorProbe(BaseModel):
    """The reply the doctor asks for, as a judge asks for its own: a small JSON object fitting a schema."""

    ok: bool


PROBE_PROMPT = 'Is this a test? Answer with the JSON object {"ok": true} and nothing else.'
PROBE_REPLY_TOKENS = 32  # bounded as a judge's call is


def check_llm(settings: Settings) -> Check:
    """A call as the judges make it (the same client, reply bound and fallbacks), from the best response format
    down: what the endpoint takes is said, and remembered for the workers."""
    key_value = settings.secret("openai_api_key")
    if not key_value and not settings.openai_base_url:
        return skip("llm", "no OPENAI_API_KEY")
    from common.llm import concurrency_for, llm_client_for
    from common.runtime import shared_redis
    from judges import LLMRequestError, TransientLLMError

    endpoint = settings.openai_base_url or "OpenAI (https://api.openai.com/v1)"
    key = mask(key_value) if key_value else "none (a keyless endpoint)"
    model = settings.judge_model
    try:
        redis_client = shared_redis(settings)
    except Exception:  # a broken REDIS_URL is the redis check's to report: learn in this process only
        redis_client = None
    client = llm_client_for(
        settings, redis_client=redis_client, max_retries=0, cache_size=0, timeout=LLM_TIMEOUT_SECONDS
    )
    client.forget_mode()  # probe afresh: the doctor says what the endpoint takes now
    try:
        client.complete(PROBE_PROMPT, _DoctorProbe, max_tokens=PROBE_REPLY_TOKENS)
    except (TransientLLMError, LLMRequestError) as error:
        return fail("llm", *_llm_problem(error.__cause__ or error, endpoint, key, model))
    mode = client.mode_for()
    detail = (
        f"{endpoint} answered a chat completion with {model} (key {key}); it takes {mode.describe()}; "
        f"{concurrency_for(settings)} call(s) in flight per process (RELMON_LLM_CONCURRENCY)"
    )
    return ok("llm", detail)


def _llm_problem(error: Exception, endpoint: str, key: str, model: str) -> tuple[str, str]:
    """What went wrong with the LLM endpoint, and the fix."""
    import openai

    if isinstance(error, openai.AuthenticationError):
        fix = "set OPENAI_API_KEY to a valid key for this endpoint (and OPENAI_BASE_URL for non-OpenAI providers)"
        return f"{endpoint} rejected the key {key} (401)", fix
    if isinstance(error, openai.PermissionDeniedError):
        return f"{endpoint}: key {key} may not use {model} (403)", "grant the key access to the model"
    if isinstance(error, openai.NotFoundError):
        fix = "set RELMON_JUDGE_MODEL to a model this endpoint serves, or check OPENAI_BASE_URL (often ends in /v1)"
        return f"{endpoint} does not know the model {model} (404)", fix
    if isinstance(error, openai.RateLimitError):
        return f"{endpoint} answered 429 (rate limit or no credit)", "check the account's quota"
    if isinstance(error, openai.APIStatusError):
        return f"{endpoint} answered {error.status_code}", "check OPENAI_BASE_URL and RELMON_JUDGE_MODEL"
    if not isinstance(error, openai.APIError):  # relmon's own words (a reply it cannot use): they say it all
        return f"{endpoint}: {error}", "check OPENAI_BASE_URL and RELMON_JUDGE_MODEL"
    fix = "check the network and OPENAI_BASE_URL (e.g. http://localhost:11434/v1 for a local server)"
    return f"cannot reach {endpoint} ({type(error).__name__})", fix
