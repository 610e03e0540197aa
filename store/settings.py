"""relmon's settings: one pydantic-settings class, read from the environment or a `.env` file.

Every other module receives a `Settings` object; nothing else reads `os.environ`.
Environment names are a contract (SLACK_*, OPENAI_*, REDIS_URL, DATABASE_URL, RELMON_*; listed in
docs/configuration.md): renaming one breaks every deployment that sets it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AliasChoices, BeforeValidator, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from judges.names import RELEVANCY
from store.settings_ingest import IngestSettings
from store.settings_limits import LimitSettings
from store.settings_llm import LLMCallFields
from store.settings_metrics import MetricsSettings
from store.settings_retention import RetentionSettings
from store.settings_sampling import SamplingSettings
from store.settings_topics import TopicSettings
from store.settings_traces import TraceSettings

SLACK_DEFAULT_API_URL = "https://slack.com/api/"
# A small current model. The 4.1 family bills cached input at a quarter of the price (gpt-4o-mini at half), which
# is what takes a cached relevancy judgment under 0.4x the cost of DeepEval's three calls (docs/performance.md).
DEFAULT_JUDGE_MODEL = "gpt-4.1-mini"


class ListPrice(NamedTuple):
    """A model's list price, USD per million tokens."""

    input: float
    cached_input: float
    output: float


# OpenAI's list prices, for the digest's cost line when RELMON_COST_* are unset. Another model (or another
# provider) is priced as the default until they are set.
LIST_PRICES: dict[str, ListPrice] = {
    "gpt-4.1-mini": ListPrice(0.40, 0.10, 1.60),
    "gpt-4.1-nano": ListPrice(0.10, 0.025, 0.40),
    "gpt-4.1": ListPrice(2.00, 0.50, 8.00),
    "gpt-4o-mini": ListPrice(0.15, 0.075, 0.60),
    "gpt-4o": ListPrice(2.50, 1.25, 10.00),
}


def _split_commas(value: object) -> object:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def _blank_is_unset(value: object) -> object:
    """`NAME=` in a .env file (as docker-compose passes it) means unset, not an empty URL or token."""
    return None if isinstance(value, str) and not value.strip() else value


# A list setting, written "a, b, c".
CommaList = Annotated[list[str], NoDecode, BeforeValidator(_split_commas)]
# Optional settings where a blank value means unset.
MaybeSecret = Annotated[SecretStr | None, BeforeValidator(_blank_is_unset)]
MaybeStr = Annotated[str | None, BeforeValidator(_blank_is_unset)]
MaybePath = Annotated[Path | None, BeforeValidator(_blank_is_unset)]

# Outcome signals (capture.outcomes): the asker asks for a human or says the answer did not help; reactions.
DEFAULT_ESCALATION_PHRASES = (
    "talk to a human",
    "speak to a human",
    "talk to a person",
    "speak to a person",
    "real person",
    "a human please",
    "human agent",
    "live agent",
    "support agent",
    "talk to someone",
    "speak to someone",
    "didn't help",
    "did not help",
    "doesn't help",
    "does not help",
    "not helpful",
    "didn't work",
    "did not work",
    "doesn't work",
    "does not work",
    "still not working",
    "still broken",
    "wrong answer",
    "that's wrong",
    "that is wrong",
    "not what i asked",
)
DEFAULT_NEGATIVE_REACTIONS = ("-1", "x", "no_entry")
DEFAULT_POSITIVE_REACTIONS = ("+1", "white_check_mark", "heart")

# The degradation time window reads at most this many of its newest answers (store.channel_scores.recent_scores): a
# minimum sample above it could never be reached, so the settings refuse one. The read runs after every judgment:
# 60 answers keep it to one batch at the default count window (3 × 20 pairs), and pin a 0–4 mean to about ±0.3.
TIME_WINDOW_MOST_ANSWERS = 60

# Retries of a transient LLM failure: no single backoff delay longer than this, each stretched by up to 25% at random.
RETRY_CAP_SECONDS = 60.0
RETRY_JITTER = 0.25


def largest_retry_delay(retry_base_seconds: float, llm_max_retries: int) -> float:
    """The longest countdown a judging retry can carry: the last step of the backoff (common.backoff, which the
    settings cannot import) with full jitter. A 429's Retry-After is honoured up to this too, so it is also the
    longest delay a rate limit can impose."""
    if llm_max_retries <= 0:
        return 0.0
    return min(RETRY_CAP_SECONDS, retry_base_seconds * 2 ** (llm_max_retries - 1)) * (1 + RETRY_JITTER)


# The shortest task lease (RELMON_VISIBILITY_TIMEOUT) relmon accepts: a live worker renews each held message
# every sixth of it (workers.lease), so even a worker busy at full concurrency renews well before it lapses.
MIN_LEASE_SECONDS = 10


def _env(name: str) -> dict:
    """Field keyword arguments that bind a field to one environment variable (and to its own name)."""
    return {"validation_alias": AliasChoices(name, name.lower())}


# Where a person gets each required setting: shown when one is missing (`relmon run`, `relmon doctor`).
WHERE_TO_GET = {
    "SLACK_BOT_TOKEN": "Slack app page > OAuth & Permissions > Bot User OAuth Token (xoxb-...)",
    "SLACK_SIGNING_SECRET": "Slack app page > Basic Information > App Credentials > Signing Secret",
    "RELMON_MONITORED_BOTS": "the support bot's bot ID (B...), app ID (A...) or bot user ID (U...): "
    "open the bot's profile in Slack, or run `relmon doctor` to list the bots it has seen",
    "RELMON_ALERT_CHANNEL": "the channel ID (C...) for alerts: channel name > About > Channel ID",
    "OPENAI_API_KEY": "your LLM provider's API key (any OpenAI-compatible endpoint; set OPENAI_BASE_URL too). "
    "A local endpoint that needs no key (Ollama, vLLM): set OPENAI_BASE_URL instead",
}


class Settings(
    BaseSettings,
    TopicSettings,
    LLMCallFields,
    RetentionSettings,
    LimitSettings,
    MetricsSettings,
    TraceSettings,
    IngestSettings,
    SamplingSettings,
):
    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="ignore", populate_by_name=True)

    # Slack
    slack_bot_token: MaybeSecret = Field(None, **_env("SLACK_BOT_TOKEN"))
    slack_signing_secret: MaybeSecret = Field(None, **_env("SLACK_SIGNING_SECRET"))
    slack_app_token: MaybeSecret = Field(None, **_env("SLACK_APP_TOKEN"))
    slack_api_url: str = Field(SLACK_DEFAULT_API_URL, **_env("SLACK_API_URL"))

    # The judge's LLM (the OpenAI SDK reads the same variables; we pass them explicitly)
    openai_api_key: MaybeSecret = Field(None, **_env("OPENAI_API_KEY"))
    openai_base_url: MaybeStr = Field(None, **_env("OPENAI_BASE_URL"))
    judge_model: str = Field(DEFAULT_JUDGE_MODEL, **_env("RELMON_JUDGE_MODEL"))
    llm_timeout_seconds: float = Field(60.0, gt=0, **_env("RELMON_LLM_TIMEOUT"))
    # Celery retries of a transient LLM failure in the pipeline (7 attempts: about two minutes at the 2 s base).
    llm_max_retries: int = Field(6, ge=0, le=10, **_env("RELMON_LLM_MAX_RETRIES"))
    max_prompt_chars: int = Field(100_000, ge=2_000, **_env("RELMON_MAX_PROMPT_CHARS"))
    # Estimated cost shown in the digest, in USD per million tokens.
    # Unset: the judge model's list price (LIST_PRICES).
    cost_per_million_input_tokens: float | None = Field(None, ge=0, **_env("RELMON_COST_INPUT_PER_MTOK"))
    cost_per_million_output_tokens: float | None = Field(None, ge=0, **_env("RELMON_COST_OUTPUT_PER_MTOK"))
    cost_per_million_cached_input_tokens: float | None = Field(
        None,
        ge=0,
        description="USD per million input tokens the provider read from its prompt cache; unset: the model's "
        "list price, or half an input price that is set.",
        **_env("RELMON_PRICE_CACHED_INPUT"),
    )

    # Infrastructure
    redis_url: MaybeStr = Field(None, **_env("REDIS_URL"))
    database_url: MaybeStr = Field(None, **_env("DATABASE_URL"))
    data_dir: Path = Field(Path("./data"), **_env("RELMON_DATA_DIR"))
    worker_concurrency: int = Field(64, ge=1, le=1000, **_env("RELMON_WORKER_CONCURRENCY"))
    # Judging is batch work and an event's acknowledgement is not: on a machine shared with the bot, a busy
    # worker at a lower CPU priority leaves the bot the cores it needs to answer Slack at once.
    worker_niceness: int = Field(10, ge=0, le=19, **_env("RELMON_WORKER_NICENESS"))

    # What to watch
    monitored_bots: CommaList = Field(default_factory=list, **_env("RELMON_MONITORED_BOTS"))
    watched_channels: CommaList = Field(default_factory=list, **_env("RELMON_WATCHED_CHANNELS"))
    alert_channel: MaybeStr = Field(None, **_env("RELMON_ALERT_CHANNEL"))
    digest_channel_setting: MaybeStr = Field(None, **_env("RELMON_DIGEST_CHANNEL"))
    channel_rules_file: MaybePath = Field(None, **_env("RELMON_CHANNEL_RULES"))
    # Who may change a channel's or a bot's rule with `/judge config`, beside the workspace's admins and owners: user
    # IDs (U…/W…) or user groups (S…).
    admins: CommaList = Field(default_factory=list, **_env("RELMON_ADMINS"))
    # A team's own judges: one TOML file each (judges.judge_files); unset: the seed judges only.
    judges_dir: MaybePath = Field(None, **_env("RELMON_JUDGES_DIR"))

    # Capture
    settle_seconds: float = Field(5.0, ge=0, le=600, **_env("RELMON_SETTLE_SECONDS"))
    question_ttl_seconds: int = Field(86_400, ge=60, **_env("RELMON_QUESTION_TTL"))
    toplevel_window_seconds: int = Field(600, ge=1, **_env("RELMON_TOPLEVEL_WINDOW"))
    history_fallback: bool = Field(True, **_env("RELMON_HISTORY_FALLBACK"))
    # `relmon backfill`: history calls per minute per method (Slack's Tier 3 is about 50), judgments in flight,
    # and how often a Batch API job is polled.
    backfill_calls_per_minute: float = Field(50.0, gt=0, **_env("RELMON_BACKFILL_CALLS_PER_MINUTE"))
    backfill_concurrency: int = Field(8, ge=1, le=256, **_env("RELMON_BACKFILL_CONCURRENCY"))
    batch_poll_seconds: float = Field(30.0, gt=0, **_env("RELMON_BATCH_POLL_SECONDS"))
    # A follow-up in a thread is judged with this many earlier turns of the conversation (0: none).
    context_turns: int = Field(3, ge=0, le=20, **_env("RELMON_CONTEXT_TURNS"))

    # Outcomes: what the customer did after an answer (capture.outcomes); a window of 0 turns them off
    outcome_window_seconds: int = Field(1800, ge=0, **_env("RELMON_OUTCOME_WINDOW"))
    # User IDs (U…/W…) or user groups (S…) whose replies count as a teammate's takeover; empty: staff on evidence
    # (capture.teammates).
    # Channel IDs allowed as a metrics label (common.metrics; the rest count as "other"): bounded cardinality.
    metrics_channel_labels: CommaList = Field(default_factory=list, **_env("RELMON_METRICS_CHANNEL_LABELS"))
    support_team: CommaList = Field(default_factory=list, **_env("RELMON_SUPPORT_TEAM"))
    escalation_phrases: CommaList = Field(
        default_factory=lambda: list(DEFAULT_ESCALATION_PHRASES), **_env("RELMON_ESCALATION_PHRASES")
    )
    negative_reactions: CommaList = Field(
        default_factory=lambda: list(DEFAULT_NEGATIVE_REACTIONS), **_env("RELMON_NEGATIVE_REACTIONS")
    )
    positive_reactions: CommaList = Field(
        default_factory=lambda: list(DEFAULT_POSITIVE_REACTIONS), **_env("RELMON_POSITIVE_REACTIONS")
    )

    # Judging
    default_judges: CommaList = Field(default_factory=lambda: [RELEVANCY], **_env("RELMON_JUDGES"))
    # RELMON_SAMPLE (and RELMON_SAMPLE_RATE, its older name): store.settings_sampling
    daily_budget: int = Field(10_000, ge=0, **_env("RELMON_DAILY_BUDGET"))
    # /judge, the shortcut and the modal draw on a budget of their own (requests per UTC day) and a per-person
    # hourly limit, so that people asking cannot spend the captured answers' budget.
    on_demand_budget: int = Field(1_000, ge=0, **_env("RELMON_ON_DEMAND_BUDGET"))
    on_demand_per_person_hour: int = Field(30, ge=0, **_env("RELMON_ON_DEMAND_PER_PERSON_HOUR"))
    # An answer edited after it was judged is judged again at most this many times (a bot that edits forever
    # cannot spend the budget).
    max_rejudge: int = Field(3, ge=0, le=100, **_env("RELMON_MAX_REJUDGE"))
    # First delay before a transient LLM failure is retried in Celery; doubles on each retry (with jitter).
    retry_base_seconds: float = Field(2.0, gt=0, le=60, **_env("RELMON_RETRY_BASE_SECONDS"))
    # The lease on a task message a worker holds: the worker renews it while alive (workers.lease), so a held
    # countdown or retry of any length is never handed out twice; a dead worker's messages go back to the queue
    # this long after its last renewal.
    visibility_timeout_seconds: int = Field(30, ge=MIN_LEASE_SECONDS, **_env("RELMON_VISIBILITY_TIMEOUT"))
    # A pair still pending or settling this long after its last change lost its task: beat re-enqueues it.
    sweep_after_seconds: int = Field(600, ge=2, **_env("RELMON_SWEEP_AFTER_SECONDS"))

    # Alerts
    threshold: int = Field(2, ge=0, le=4, **_env("RELMON_THRESHOLD"))
    correctness_threshold: int = Field(0, ge=0, le=2, **_env("RELMON_CORRECTNESS_THRESHOLD"))
    grounded_threshold: int = Field(2, ge=1, le=5, **_env("RELMON_GROUNDED_THRESHOLD"))
    # Degradation: the channel's mean relevancy is below the floor over its last N answers, or over the answers
    # of the last M minutes when there are at least RELMON_DEGRADATION_MIN_ANSWERS of them (0 minutes: off).
    degradation_window: int = Field(20, ge=2, **_env("RELMON_DEGRADATION_WINDOW"))
    degradation_window_minutes: int = Field(60, ge=0, le=24 * 60, **_env("RELMON_DEGRADATION_WINDOW_MINUTES"))
    degradation_min_answers: int = Field(5, ge=1, le=TIME_WINDOW_MOST_ANSWERS, **_env("RELMON_DEGRADATION_MIN_ANSWERS"))
    degradation_floor: float = Field(2.5, ge=0, le=4, **_env("RELMON_DEGRADATION_FLOOR"))
    alert_cap_per_hour: int = Field(10, ge=1, **_env("RELMON_ALERT_CAP_PER_HOUR"))
    # Alerts (low-score and degradation) one alert channel receives per hour from all its source channels together.
    alert_channel_cap_per_hour: int = Field(30, ge=1, **_env("RELMON_ALERT_CHANNEL_CAP_PER_HOUR"))
    # Change alerts: a channel's, bot's or topic's failure rate rising above its own baseline (a Bernoulli CUSUM,
    # workers.alerts.changes; docs/statistics.md): on/off, false alarms per group-month on stable traffic, and the
    # answers of its own history a group needs before it is watched.
    change_alerts: bool = Field(True, **_env("RELMON_CHANGE_ALERTS"))
    change_alert_false_alarms: float = Field(0.5, gt=0, le=10, **_env("RELMON_CHANGE_ALERT_FALSE_ALARMS"))
    change_alert_min_baseline: int = Field(200, ge=50, **_env("RELMON_CHANGE_ALERT_MIN_BASELINE"))
    # A low score alerts only when a second opinion (another seed, temperature 0.7, or another model) is low too.
    confirm: Literal["second_opinion", "off"] = Field("second_opinion", **_env("RELMON_CONFIRM"))
    confirm_model: str | None = Field(None, **_env("RELMON_CONFIRM_MODEL"))

    # The canary: a labelled set re-judged weekly; a kappa drop this large (or a new model) is "the judge moved".
    canary_file: Path | None = Field(None, **_env("RELMON_CANARY_FILE"))
    canary_drop: float = Field(0.15, gt=0, le=2, **_env("RELMON_CANARY_DROP"))

    # Digest
    digest_day: str = Field("mon", **_env("RELMON_DIGEST_DAY"))
    digest_hour: int = Field(9, ge=0, le=23, **_env("RELMON_DIGEST_HOUR"))
    # The team's time zone: the digest's day and hour, the days of charts and reports, times shown in the CLI.
    # RELMON_DIGEST_TIMEZONE is its older name, still read.
    timezone: str = Field(
        "UTC",
        validation_alias=AliasChoices(
            "RELMON_TIMEZONE", "relmon_timezone", "RELMON_DIGEST_TIMEZONE", "relmon_digest_timezone"
        ),
    )

    # Privacy and operations
    redact_pii: bool = Field(False, **_env("RELMON_REDACT_PII"))
    retention_days: int = Field(90, ge=1, **_env("RELMON_RETENTION_DAYS"))
    sentry_dsn: MaybeSecret = Field(None, **_env("SENTRY_DSN"))
    log_level: str = Field("INFO", **_env("RELMON_LOG_LEVEL"))

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r}: use an IANA name such as Europe/Paris or UTC") from None
        return value

    @field_validator("digest_day")
    @classmethod
    def _check_day(cls, value: str) -> str:
        day = value.strip().lower()[:3]
        if day not in {"mon", "tue", "wed", "thu", "fri", "sat", "sun"}:
            raise ValueError("RELMON_DIGEST_DAY must be a weekday name such as mon or monday")
        return day

    # Derived values ---------------------------------------------------------------------------

    @property
    def _list_price(self) -> ListPrice:
        return LIST_PRICES.get(self.judge_model, LIST_PRICES[DEFAULT_JUDGE_MODEL])

    @property
    def input_price(self) -> float:
        """USD per million input tokens: the setting, or the judge model's list price."""
        if self.cost_per_million_input_tokens is None:
            return self._list_price.input
        return self.cost_per_million_input_tokens

    @property
    def output_price(self) -> float:
        """USD per million output tokens: the setting, or the judge model's list price."""
        if self.cost_per_million_output_tokens is None:
            return self._list_price.output
        return self.cost_per_million_output_tokens

    @property
    def cached_input_price(self) -> float:
        """USD per million cached input tokens: the setting; unset, half an input price that is set (a price of
        one's own, such as a gateway's), else the judge model's list price."""
        if self.cost_per_million_cached_input_tokens is not None:
            return self.cost_per_million_cached_input_tokens
        if self.cost_per_million_input_tokens is not None:
            return self.cost_per_million_input_tokens / 2
        return self._list_price.cached_input

    @property
    def digest_channel(self) -> str | None:
        return self.digest_channel_setting or self.alert_channel

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'relmon.sqlite3').resolve()}"

    def secret(self, name: str) -> str | None:
        """The plain value of a SecretStr setting (or None)."""
        value = getattr(self, name)
        return value.get_secret_value() if value is not None else None

    def missing(self, *, slack: bool = True, llm: bool = True, events: bool = True) -> list[str]:
        """Names of required environment variables that are not set, for the parts asked for.

        `slack`: the bot token, and with `events` also what receiving and pairing Slack events takes (the signing
        secret unless Socket Mode, the monitored bots, the alert channel). `relmon worker` asks `events=False`: it
        posts to Slack but receives nothing. `llm`: OPENAI_API_KEY, unless OPENAI_BASE_URL names an endpoint (a
        local server such as Ollama or vLLM needs no key)."""
        absent: list[str] = []
        if slack:
            if not self.slack_bot_token:
                absent.append("SLACK_BOT_TOKEN")
            if events and not self.slack_signing_secret and not self.slack_app_token:
                absent.append("SLACK_SIGNING_SECRET")
            if events and not self.monitored_bots:
                absent.append("RELMON_MONITORED_BOTS")
            if events and not self.alert_channel:
                absent.append("RELMON_ALERT_CHANNEL")
        if llm and not self.openai_api_key and not self.openai_base_url:
            absent.append("OPENAI_API_KEY")
        return absent

    def missing_message(self, *, slack: bool = True, llm: bool = True, events: bool = True) -> str | None:
        """A message listing exactly what to set and where to get it, or None when nothing is missing."""
        absent = self.missing(slack=slack, llm=llm, events=events)
        if not absent:
            return None
        lines = ["relmon cannot start: these settings are missing (set them in the environment or .env):"]
        lines += [f"  {name}: {WHERE_TO_GET[name]}" for name in absent]
        return "\n".join(lines)


def invalid_settings_message(error: ValidationError) -> str:
    """A ValidationError from Settings() as lines a person can act on: the environment variable, what is wrong."""
    lines = ["relmon cannot start: these settings are invalid (fix them in the environment or .env):"]
    for problem in error.errors(include_url=False):
        field = problem["loc"][0] if problem["loc"] else None
        info = Settings.model_fields.get(field) if isinstance(field, str) else None
        alias = getattr(info, "validation_alias", None) if info else None
        name = alias.choices[0] if isinstance(alias, AliasChoices) else field
        message = problem["msg"].removeprefix("Value error, ")
        lines.append(f"  {name}: {message}" if name else f"  {message}")  # a rule across several settings
    return "\n".join(lines)


def mask(secret: str | None) -> str:
    """Show a secret the way doctor and logs may: its kind prefix and last four characters."""
    if not secret:
        return "(unset)"
    if len(secret) <= 8:
        return "****"
    prefix = secret.split("-", 1)[0] + "-" if "-" in secret[:6] else ""
    return f"{prefix}****{secret[-4:]}"
