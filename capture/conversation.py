"""The conversation before a question: the earlier turns of its thread, which a follow-up needs to be understood
("and on Android?"). Pure: plain logged messages in, plain messages out."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from capture.pairing import Author, LoggedMessage, thread_messages, ts_key

# Whose messages are turns of the conversation: other bots and relmon itself are not part of it.
SPEAKERS = {Author.HUMAN: "customer", Author.MONITORED_BOT: "bot"}


def earlier_turns(question: LoggedMessage, messages: Iterable[LoggedMessage]) -> list[tuple[str, LoggedMessage]]:
    """(speaker, message) of the thread's messages before `question`, oldest first: the people's ("customer")
    and the monitored bot's ("bot"), deleted and wordless ones left out. None for a top-level question that
    starts no thread (the channel's other top-level messages are other conversations)."""
    return [
        (SPEAKERS[message.author], message)
        for message in thread_messages(question.thread_key, messages)
        if message.author in SPEAKERS and not message.wordless and ts_key(message) < ts_key(question)
    ]


def stored_turns(pairs: Sequence[tuple[str | None, str | None]]) -> list[tuple[str, str]]:
    """(speaker, text) of a thread's stored answers with their questions ((question_text, answer_text), oldest
    first): the earlier turns of a thread that resumes after the conversation log forgot it."""
    return [
        (speaker, text)
        for question, answer in pairs
        for speaker, text in (("customer", question), ("bot", answer))
        if text and text.strip()
    ]
