"""Capture: pure pairing rules (`capture.pairing`), Slack text normalisation (`capture.text`), the Redis
conversation log with its rate-limited history fall-back (`capture.conversation_log`) and cached Slack
look-ups (`capture.directory`). Shared by the bot (at capture) and the workers (at settle time)."""

from capture.pairing import Author, Identity, LoggedMessage, Resolution, answer_run, find_question, resolve
from capture.text import message_text, render_markup

__all__ = [
    "Author",
    "Identity",
    "LoggedMessage",
    "Resolution",
    "answer_run",
    "find_question",
    "message_text",
    "render_markup",
    "resolve",
]
