"""The export of judged answers with their outcome signals, the pair captured and observed through signed events
(the workers run in-process): every row gets its pair's signals, and the correctness row the teammate's reply as
its reference."""

from __future__ import annotations

from tests import slack_requests as sr
from tests.bot_harness import ServedBot
from tests.outcome_helpers import C, answered, run, send, sent, slack

__all__ = ["sent", "slack"]  # the shared fixtures (tests.outcome_helpers), for this module's tests


def exported_rows(bot: ServedBot, sent: list) -> list[dict]:
    """The asker escalates, a teammate replies (the reference), and the pair is judged for relevancy and
    correctness: the export's rows, with their signals."""
    from relmon.export import with_signals
    from store.judgments import export_rows
    from store.models import Judgment

    q, _, pair = answered(bot, sent)
    send(bot, sr.human_message(C, sr.next_ts(), "Still broken, help", thread_ts=q["ts"]))
    send(bot, sr.human_message(C, sr.next_ts(), "Use the Keys tab.", user="U_AGENT", thread_ts=q["ts"]))
    run(bot, sent)
    with bot.runtime.db.session() as session:
        for judge in ("relevancy", "correctness"):
            session.add(Judgment(pair_id=pair.id, judge=judge, status="ok", score=1, pair_version=pair.version))
    with bot.runtime.db.session() as session:
        return list(with_signals(session, export_rows(session)))


def test_export_gives_every_row_its_pairs_signals(make_bot, sent) -> None:
    import io

    from relmon.export import write_csv, write_jsonl

    rows = exported_rows(make_bot(), sent)
    assert [(r["judge"], r["signals"]) for r in rows] == [
        ("relevancy", ["escalation", "human_takeover"]),
        ("correctness", ["escalation", "human_takeover"]),
    ]
    text = io.StringIO()
    write_csv(rows, text)
    assert "escalation;human_takeover" in text.getvalue()
    lines = io.StringIO()
    write_jsonl(rows, lines)
    assert '"signals": ["escalation", "human_takeover"]' in lines.getvalue()


def test_export_gives_the_correctness_row_the_teammates_reply_as_its_reference(make_bot, sent) -> None:
    rows = exported_rows(make_bot(), sent)
    assert [(r["judge"], r["reference"]) for r in rows] == [("relevancy", None), ("correctness", "Use the Keys tab.")]
