"""The metrics' settings (`common.metrics`), a fields class `store.settings.Settings` inherits: who may scrape
(`common.metrics_door`), the bot's, worker's and beat's ports, which channels may appear as labels, and the
directory the processes of one component share."""

from __future__ import annotations

from typing import Annotated

from pydantic import AliasChoices, BaseModel, BeforeValidator, Field, SecretStr


def _blank_is_unset(value: object) -> object:
    """`RELMON_METRICS_TOKEN=` (docker-compose passes blanks) means no token, not an empty one anyone can send."""
    return None if isinstance(value, str) and not value.strip() else value


def _env(name: str) -> dict:
    return {"validation_alias": AliasChoices(name, name.lower())}


class MetricsSettings(BaseModel):
    # GET /metrics is never an open door beside /slack/events (common.metrics_door). With a token, every /metrics
    # (the bot's --port, and the ports below, then listening on all interfaces) asks `Authorization: Bearer
    # <token>`. Without one, the bot's --port serves no /metrics (404 with a hint) and the ports below listen on
    # 127.0.0.1 only.
    metrics_token: Annotated[SecretStr | None, BeforeValidator(_blank_is_unset)] = Field(
        None, **_env("RELMON_METRICS_TOKEN")
    )
    # The bot's own metrics port (0: none): GET /metrics only, on 127.0.0.1 unless the token guards it.
    metrics_port: int = Field(0, ge=0, le=65535, **_env("RELMON_METRICS_PORT"))
    # `relmon worker` and `relmon beat` serve GET /metrics on these ports (0: not served), bound as above.
    worker_metrics_port: int = Field(9464, ge=0, le=65535, **_env("RELMON_WORKER_METRICS_PORT"))
    beat_metrics_port: int = Field(9465, ge=0, le=65535, **_env("RELMON_BEAT_METRICS_PORT"))
    # Where `relmon doctor` reads the bot's /metrics from (with the token, when one is set).
    metrics_url: str = Field("http://127.0.0.1:3000/metrics", **_env("RELMON_METRICS_URL"))
    # Where the processes of one component (gunicorn's workers, Celery's pool) write their counters for the one
    # endpoint to add up (prometheus-client's multiprocess mode), and the bot its state read once for all of them.
    # Unset: a fresh temporary directory per start.
    metrics_dir: str | None = Field(None, **_env("RELMON_METRICS_DIR"))
