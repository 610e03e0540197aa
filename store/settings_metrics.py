"""The metrics' settings (`common.metrics`), a fields class `store.settings.Settings` inherits: the worker's and
beat's ports, which channels may appear as labels, and the directory the processes of one component share."""

from __future__ import annotations

from pydantic import AliasChoices, BaseModel, Field


def _env(name: str) -> dict:
    return {"validation_alias": AliasChoices(name, name.lower())}


class MetricsSettings(BaseModel):
    # `relmon worker` and `relmon beat` serve GET /metrics on these ports (0: not served). The bot serves it on its
    # own --port, beside /healthz.
    metrics_port: int = Field(9464, ge=0, le=65535, **_env("RELMON_METRICS_PORT"))
    beat_metrics_port: int = Field(9465, ge=0, le=65535, **_env("RELMON_BEAT_METRICS_PORT"))
    # Where the processes of one component (gunicorn's workers, Celery's pool) write their counters for the one
    # endpoint to add up (prometheus-client's multiprocess mode). Unset: a fresh temporary directory per start.
    # Where `relmon doctor` reads the bot's /metrics from.
    metrics_url: str = Field("http://127.0.0.1:3000/metrics", **_env("RELMON_METRICS_URL"))
    metrics_dir: str | None = Field(None, **_env("RELMON_METRICS_DIR"))
