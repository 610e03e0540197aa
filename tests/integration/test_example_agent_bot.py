"""examples/agent_bot, for real: its `forward_to_relmon` (imported from the example) against relmon's bot served in
this process (tests.bot_harness, on real Redis and real databases) stores the exchange; its Bolt app, given a
signed `message.im` event with the fake Slack and the fake LLM, shows its status, answers in the thread and
forwards the turn, which relmon stores with the question and the answer it posted."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

import pytest
from slack_bolt.request import BoltRequest
from sqlalchemy import select

from store.exchange_models import Exchange
from store.models import Pair, PairSource, PairStatus
from tests.bot_harness import BotServer
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.processes import wait_for
from tests.slack_requests import envelope, sign

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent_bot"
TOKEN, SECRET = "ingest-token", "agent-signing-secret"


class AgentSlack(FakeSlack):
    """The fake Slack with `assistant.threads.setStatus` (what Bolt's `set_status` calls), recorded as any call."""

    def _api_assistant_threads_setStatus(self, params: dict) -> dict:
        return {"ok": True}


def load(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """A module of the example as the example runs it (its folder on the path)."""
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.delitem(sys.modules, "relmon_forward", raising=False)
    spec = importlib.util.spec_from_file_location(f"agent_bot_{name}", EXAMPLE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def exchanges(bot) -> list[tuple[Exchange, Pair]]:
    with bot.runtime.db.session() as session:
        rows = session.execute(select(Exchange, Pair).join(Pair, Pair.id == Exchange.pair_id)).all()
        session.expunge_all()
        return [tuple(row) for row in rows]


@pytest.fixture
def slack():
    with AgentSlack() as fake:
        yield fake


def test_forward_to_relmon_stores_the_exchange(settings_for, slack, monkeypatch) -> None:
    forward = load("relmon_forward", monkeypatch).forward_to_relmon
    asked = datetime(2026, 12, 7, 8, 0, tzinfo=UTC)
    with BotServer(settings_for(slack_api_url=slack.api_url, ingest_tokens=TOKEN)) as bot:
        monkeypatch.setenv("RELMON_URL", bot.base_url)
        monkeypatch.setenv("RELMON_INGEST_TOKEN", TOKEN)
        monkeypatch.setenv("RELMON_BOT_NAME", "acme-agent")
        turn = {"exchange_id": "D0AGENT1-1765094400.000200", "conversation_id": "D0AGENT1/1765094400.000100"}
        sent = forward("Where is my invoice?", "Billing, Invoices.", **turn, turn=0, asked_at=asked,
                       answered_at=asked + timedelta(seconds=2), asker="U0ASKER")  # fmt: skip
        assert sent is True
        again = forward("Where is my invoice?", "Billing, Invoices.", **turn, turn=0, asked_at=asked,
                        answered_at=asked + timedelta(seconds=2))  # fmt: skip
        assert again is True  # a resend: taken, stored once
        refused = forward("Q?", "A.", exchange_id="x", conversation_id="c", turn=0, asked_at=asked,
                          answered_at=asked, token="wrong")  # fmt: skip
        assert refused is False  # relmon refusing never raises into the bot
        [(row, pair)] = exchanges(bot)
    assert (row.bot, row.client_id, row.visibility, row.asker, row.turn) == (
        "acme-agent", turn["exchange_id"], "dm", "U0ASKER", 0,
    )  # fmt: skip
    assert (pair.source, pair.status, pair.question_text, pair.answer_text) == (
        PairSource.INGEST, PairStatus.PENDING, "Where is my invoice?", "Billing, Invoices.",
    )  # fmt: skip


def test_the_bolt_app_answers_in_its_dm_and_forwards_the_turn(settings_for, slack, monkeypatch) -> None:
    answer = "Open Reports, pick the report, then Export."
    with FakeOpenAI() as llm, BotServer(settings_for(slack_api_url=slack.api_url, ingest_tokens=TOKEN)) as bot:
        llm.set_reply(lambda body: answer)
        for name, value in {"OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "sk-test", "RELMON_URL": bot.base_url,
                            "RELMON_INGEST_TOKEN": TOKEN}.items():  # fmt: skip
            monkeypatch.setenv(name, value)
        app = load("app", monkeypatch).create_app("xoxb-agent", SECRET, slack.api_url)
        ts = f"{time.time():.6f}"
        event = {"type": "message", "channel": "D0AGENT1", "channel_type": "im", "user": "U0ASKER",
                 "text": "How do I export a report?", "ts": ts, "event_ts": ts}  # fmt: skip
        body = json.dumps(envelope(event))
        headers = {k.lower(): [v] for k, v in sign(body.encode(), SECRET).items()}
        acked = app.dispatch(BoltRequest(body=body, headers={**headers, "content-type": ["application/json"]}))
        assert acked.status == 200
        [posted] = slack.wait_for("chat.postMessage")
        [(row, pair)] = wait_for(lambda: exchanges(bot), what="the forwarded exchange")
    assert posted["channel"] == "D0AGENT1" and posted["thread_ts"] == ts and posted["text"] == answer
    assert slack.calls_to("assistant.threads.setStatus")[0]["status"] == "is thinking…"
    assert llm.requests[0]["messages"][-1] == {"role": "user", "content": "How do I export a report?"}
    assert (row.conversation_id, row.turn, row.asker, row.visibility) == (f"D0AGENT1/{ts}", 0, "U0ASKER", "dm")
    assert (pair.question_text, pair.answer_text, pair.source) == (
        "How do I export a report?", answer, PairSource.INGEST,
    )  # fmt: skip
