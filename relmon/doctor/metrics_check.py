"""The doctor's check of the bot's `GET /metrics` (RELMON_METRICS_URL, asked with RELMON_METRICS_TOKEN when one
is set): it answers, parses as Prometheus text (prometheus-client's own parser), and the bot could read the
database and Redis for it (relmon_state_up)."""

from __future__ import annotations

import httpx

from relmon.doctor.checks import Check, fail, ok, skip
from store.settings import Settings

METRICS_TIMEOUT_SECONDS = 10.0
NOT_RUNNING_FIX = "start `relmon bot`, or set RELMON_METRICS_URL to where its /metrics is reached from here"
NO_DOOR_FIX = (
    "set RELMON_METRICS_TOKEN (bot and doctor alike), or RELMON_METRICS_PORT and point RELMON_METRICS_URL at it"
)


def check_metrics(settings: Settings) -> Check:
    from prometheus_client.parser import text_string_to_metric_families

    url = settings.metrics_url
    token = settings.secret("metrics_token")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx.get(url, headers=headers, timeout=METRICS_TIMEOUT_SECONDS)
    except httpx.HTTPError as error:
        # The doctor often runs where the bot is not (a one-off container, before the first start): not checked.
        return skip("metrics", f"no answer from {url} ({type(error).__name__}); {NOT_RUNNING_FIX}")
    if response.status_code == 401:
        return fail("metrics", f"{url} refused the token (401)", "give the doctor the bot's RELMON_METRICS_TOKEN")
    if response.status_code == 404 and _closed_door(response):
        # Not an error: without a token, the bot's --port serves no /metrics by design (common.metrics_door).
        return skip("metrics", f"{url} serves no /metrics without a token; {NO_DOOR_FIX}")
    if response.status_code != 200:
        return fail(
            "metrics", f"{url} answered {response.status_code}", "point RELMON_METRICS_URL at relmon bot's /metrics"
        )
    try:
        families = {family.name: family for family in text_string_to_metric_families(response.text)}
    except ValueError as error:
        return fail("metrics", f"{url} is not Prometheus text ({str(error)[:80]})", "point it at relmon bot's /metrics")
    state = families.get("relmon_state_up")
    if state is None:
        return fail("metrics", f"{url} serves no relmon_state_up: not relmon bot's /metrics", NOT_RUNNING_FIX)
    if not state.samples or state.samples[0].value != 1:
        return fail("metrics", f"{url} answers, but the bot cannot read the database or Redis for it", "see its log")
    return ok("metrics", f"{url} answers: {len(families)} metric families")


def _closed_door(response: httpx.Response) -> bool:
    """The bot's own 404 for /metrics on its --port without a token (it carries a hint), not a wrong path."""
    try:
        body = response.json()
    except ValueError:
        return False
    return isinstance(body, dict) and "RELMON_METRICS_TOKEN" in str(body.get("hint", ""))
