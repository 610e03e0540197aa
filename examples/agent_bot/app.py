"""A support agent in Slack's agent messaging experience (its conversations are DMs with the app: the Messages tab,
threads in a timeline), built with Bolt for Python. It answers with an LLM, then forwards the turn to relmon
(relmon_forward.py), which cannot read those DMs itself.

Run: `python app.py` (Socket Mode: SLACK_BOT_TOKEN, SLACK_APP_TOKEN; OPENAI_API_KEY; RELMON_URL and
RELMON_INGEST_TOKEN for relmon). The manifest is manifest.yaml."""

from __future__ import annotations

import os
from collections import Counter
from datetime import UTC, datetime

from openai import OpenAI
from relmon_forward import forward_to_relmon
from slack_bolt import App
from slack_sdk import WebClient

INSTRUCTIONS = "You are the support agent of Acme. Answer briefly and say when you do not know."


def create_app(token: str, signing_secret: str | None = None, slack_api_url: str | None = None) -> App:
    client = WebClient(token=token, base_url=slack_api_url) if slack_api_url else WebClient(token=token)
    app = App(client=client, signing_secret=signing_secret or "socket-mode")
    llm = OpenAI()
    turns: Counter[str] = Counter()  # turns per conversation (thread) in this process

    @app.event("app_home_opened")
    def opened(event, logger) -> None:
        if event.get("tab") == "messages":  # the agent's DM was opened (replaces assistant_thread_started)
            logger.info("agent DM opened by %s", event.get("user"))

    @app.event("message")
    def answer(event, say, set_status, logger) -> None:
        if event.get("channel_type") != "im" or event.get("subtype") or event.get("bot_id") or not event.get("text"):
            return  # the agent's own replies, edits and notices
        asked_at, question = datetime.now(UTC), event["text"]
        thread_ts = event.get("thread_ts") or event["ts"]
        set_status("is thinking…")
        reply = llm.chat.completions.create(
            model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
            messages=[{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": question}],
        )
        text = reply.choices[0].message.content or "Sorry, I have no answer."
        posted = say(text=text, thread_ts=thread_ts)
        conversation = f"{event['channel']}/{thread_ts}"
        turns[conversation] += 1
        forward_to_relmon(
            question, text, exchange_id=f"{event['channel']}-{posted['ts']}", conversation_id=conversation,
            turn=turns[conversation] - 1, asked_at=asked_at, answered_at=datetime.now(UTC), asker=event.get("user"),
        )  # fmt: skip

    return app


if __name__ == "__main__":
    from slack_bolt.adapter.socket_mode import SocketModeHandler

    SocketModeHandler(create_app(os.environ["SLACK_BOT_TOKEN"]), os.environ["SLACK_APP_TOKEN"]).start()
