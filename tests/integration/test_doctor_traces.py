"""`relmon doctor`'s checks of the tracing tools that are set (relmon.doctor.trace_checks), against the fake
Langfuse and the OTLP receiver that decodes the protobuf; against a real Phoenix:
tests/system/test_traces_phoenix.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from relmon.doctor.trace_checks import check_traces
from tests.builders import make_settings
from tests.fakes.langfuse_server import FakeLangfuse
from tests.fakes.otlp_receiver import FakeOtlpReceiver
from tests.services import free_port


def lines(**values: object) -> list[str]:
    return [check.line() for check in check_traces(make_settings(**values))]


def test_no_tool_set_no_line() -> None:
    assert lines(langfuse_host=None, phoenix_url=None, otlp_endpoint=None) == []


LANGFUSE_KEYS = {"langfuse_public_key": "pk-lf-test", "langfuse_secret_key": "sk-lf-test"}


def test_langfuse_keys_that_read_the_project_pass(langfuse: FakeLangfuse) -> None:
    assert lines(**LANGFUSE_KEYS, langfuse_host=langfuse.url) == [
        f"ok    langfuse: {langfuse.url} takes the keys (project: support-bot)"
    ]


def test_wrong_langfuse_keys_say_what_to_set(langfuse: FakeLangfuse) -> None:
    (refused,) = lines(**LANGFUSE_KEYS | {"langfuse_secret_key": "sk-lf-wrong"}, langfuse_host=langfuse.url)
    assert refused.startswith(f"FAIL  langfuse: {langfuse.url} refused the keys (401)")
    assert "fix: set RELMON_LANGFUSE_PUBLIC_KEY and _SECRET_KEY" in refused


def test_a_langfuse_out_of_reach_says_what_to_fix() -> None:
    (down,) = lines(**LANGFUSE_KEYS, langfuse_host=f"http://127.0.0.1:{free_port()}")
    assert "FAIL  langfuse: no answer from" in down and "fix: start Langfuse or correct RELMON_LANGFUSE_HOST" in down


@pytest.fixture
def otlp() -> Iterator[FakeOtlpReceiver]:
    with FakeOtlpReceiver() as receiver:
        yield receiver


@pytest.mark.parametrize("form", ["logs", "spans"])
def test_an_otlp_endpoint_that_takes_an_empty_export_passes(otlp: FakeOtlpReceiver, form: str) -> None:
    assert lines(otlp_endpoint=otlp.url, otlp_events_as=form) == [
        f"ok    otlp: {otlp.url}/v1/{'traces' if form == 'spans' else 'logs'} takes an export ({form})"
    ]


@pytest.mark.parametrize("form", ["logs", "spans"])
def test_the_otlp_check_stores_nothing_at_the_endpoint(otlp: FakeOtlpReceiver, form: str) -> None:
    lines(otlp_endpoint=otlp.url, otlp_events_as=form)
    assert otlp.posts == 1 and not otlp.log_records() and not otlp.spans()


def test_an_otlp_key_refused_says_what_to_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%20wrong-token")
    with FakeOtlpReceiver(token="right-token") as otlp:
        (refused,) = lines(otlp_endpoint=otlp.url)
    assert refused.startswith(f"FAIL  otlp: {otlp.url}/v1/logs refused the key (401)")
    assert "fix: put the key in OTEL_EXPORTER_OTLP_HEADERS" in refused


def test_an_otlp_endpoint_out_of_reach_says_what_to_fix() -> None:
    (down,) = lines(otlp_endpoint=f"http://127.0.0.1:{free_port()}")
    assert "FAIL  otlp: no answer from" in down and "correct OTEL_EXPORTER_OTLP_ENDPOINT" in down
