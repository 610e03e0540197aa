"""Per-process resources that tasks and listeners share: settings, database, Redis, Slack and LLM clients.

Built once per process from `Settings` (lazily, so importing a task module connects to nothing).
Tests and `relmon run` install their own with `set_runtime`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from functools import cached_property

import redis
from slack_sdk import WebClient
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

from common.celery_app import broker_url_for, embedded_socket_path
from common.embedded_redis import answering
from common.replies import UnsentRetryHandler
from judges.judge_files import JudgeCatalog
from store.db import Database
from store.judge_catalog import judge_catalog
from store.rule_overrides import RuleSource
from store.rules import ChannelRules
from store.settings import Settings


def redis_client_for(settings: Settings) -> redis.Redis:
    """A redis-py client on the same server as the broker (Celery's redis+socket:// becomes unix://)."""
    url = broker_url_for(settings)
    if url.startswith("redis+socket://"):
        url = "unix://" + url.removeprefix("redis+socket://")
    return redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=3, health_check_interval=30)


def shared_redis(settings: Settings) -> redis.Redis | None:
    """Redis for a command that runs without a worker (`relmon judge`, `eval`, `doctor`, `backfill`): REDIS_URL,
    or the embedded Redis when it is running; None when neither is (what it learns stays in the process)."""
    if not settings.redis_url and not answering(embedded_socket_path(settings)):
        return None
    return redis_client_for(settings)


SLACK_TIMEOUT_SECONDS = 15
SLACK_CONNECTION_RETRIES = 2  # of a request that could not be sent at all


def slack_client_for(settings: Settings) -> WebClient:
    """slack_sdk client at SLACK_API_URL that waits out 429s (Retry-After) and retries a request only when it
    never left (no connection could be made). Not slack_sdk's ConnectionErrorRetryHandler: it also re-sends a
    request whose connection closed or reset after it was sent, when Slack may have carried it out already (a
    second chat.postMessage). A call that went out but got no answer (that, or a timeout) is raised to the task:
    a post's own retry first looks for the earlier post (workers.tasks.slack, workers.digest.delivery)."""
    base_url = settings.slack_api_url if settings.slack_api_url.endswith("/") else settings.slack_api_url + "/"
    # The handlers replace slack_sdk's default list, which holds a ConnectionErrorRetryHandler of its own.
    return WebClient(
        token=settings.secret("slack_bot_token"),
        base_url=base_url,
        timeout=SLACK_TIMEOUT_SECONDS,
        retry_handlers=[
            RateLimitErrorRetryHandler(max_retry_count=5),
            UnsentRetryHandler(max_retry_count=SLACK_CONNECTION_RETRIES),
        ],
    )


@dataclass
class Runtime:
    settings: Settings
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @cached_property
    def db(self) -> Database:
        database = Database(self.settings.resolved_database_url, pool_size=min(self.settings.worker_concurrency, 20))
        return database

    @cached_property
    def redis(self) -> redis.Redis:
        return redis_client_for(self.settings)

    @cached_property
    def slack(self) -> WebClient:
        return slack_client_for(self.settings)

    @cached_property
    def rule_source(self) -> RuleSource:
        """The one reader of the rules in force: the rules file with the changes made in Slack (`/judge config`)."""
        return RuleSource(self.settings.channel_rules_file, lambda: self.db)

    @property
    def rules(self) -> ChannelRules:
        """The rules in force, read again at most RULES_REFRESH_SECONDS after a change made in another process."""
        return self.rule_source.current()

    @property
    def judges(self) -> JudgeCatalog:
        """The seed judges and the team's (RELMON_JUDGES_DIR), read again when a judge file changes."""
        return judge_catalog(self.settings)

    @cached_property
    def known_channels(self):  # -> capture.directory.KnownChannels
        """Channels' privacy and sharing as looked up so far in this process (kept a few minutes between events)."""
        from capture.directory import KnownChannels

        return KnownChannels(self.redis, self.slack)

    @cached_property
    def bot_users(self):  # -> capture.directory.BotUsers
        """The monitored bots' user IDs as learnt so far in this process (kept between events)."""
        from capture.directory import BotUsers

        return BotUsers(self.redis, self.slack, self.settings.monitored_bots)

    @cached_property
    def llm(self):  # -> judges.LLMClient
        from common.llm import llm_client_for

        # The pipeline retries transient LLM failures in Celery (with backoff); the client must not retry too.
        return llm_client_for(self.settings, redis_client=self.redis, max_retries=0)


_runtime: Runtime | None = None
_runtime_lock = threading.Lock()


def get_runtime() -> Runtime:
    global _runtime
    if _runtime is None:
        with _runtime_lock:
            if _runtime is None:
                _runtime = Runtime(Settings())
    return _runtime


def set_runtime(runtime: Runtime | None) -> None:
    global _runtime
    _runtime = runtime
