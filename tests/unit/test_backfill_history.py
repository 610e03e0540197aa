"""Pure pairing over history pages and the export reader."""

from __future__ import annotations

import io
import zipfile

from capture.history import HistoryPairer, newest_first_threads, read_message
from capture.pairing import Identity
from relmon.backfill.export_reader import SlackExport
from relmon.backfill.slack_history import TokenBucket
from tests.backfill_helpers import BOT, export_zip, history_messages


def pair_all(messages, window=600.0):
    pairer = HistoryPairer(window)
    found = []
    for root, replies in newest_first_threads([messages]):
        logged = [m for m in (read_message(r, [BOT], Identity("U_RELMON")) for r in (root, *replies)) if m]
        if logged:
            found += pairer.feed(logged)
    return found + pairer.finish()


def test_threads_and_top_level_pairs():
    found = pair_all(history_messages("C", 6))
    assert len(found) == 6
    assert {p.question_text for p in found} == {f"how do I reset item {i}?" for i in range(6)}
    assert all(p.thread_ts for p in found if p.question_text.endswith(("0?", "2?", "4?")))


def test_answer_run_and_deleted_and_notice():
    q = {"ts": "100.000000", "user": "U1", "text": "why?", "thread_ts": "100.000000", "reply_count": 2}
    a1 = {"ts": "101.000000", "bot_id": BOT, "user": "U_SUPPORT", "text": "part one", "thread_ts": "100.000000"}
    a2 = {"ts": "102.000000", "bot_id": BOT, "user": "U_SUPPORT", "text": "part two", "thread_ts": "100.000000"}
    tomb = {"ts": "50.000000", "subtype": "tombstone", "text": "This message was deleted.", "thread_ts": "50.000000"}
    a3 = {"ts": "51.000000", "bot_id": BOT, "user": "U_SUPPORT", "text": "orphan", "thread_ts": "50.000000"}
    found = pair_all([q, a1, a2, tomb, a3])
    assert [(p.answer_ts, p.answer_text) for p in found] == [("101.000000", "part one\npart two")]


def test_top_level_answer_waits_for_its_window_and_the_floor_holds_it():
    pairer = HistoryPairer(600.0)
    answer = read_message({"ts": "1000.000000", "bot_id": BOT, "text": "yes"}, [BOT], Identity())
    assert pairer.feed([answer]) == [] and pairer.floor() == "1000.000000"
    question = read_message({"ts": "900.000000", "user": "U1", "text": "ok?"}, [BOT], Identity())
    assert pairer.feed([question]) == []
    old = read_message({"ts": "10.000000", "user": "U1", "text": "old"}, [BOT], Identity())
    [pair] = pairer.feed([old])
    assert pair.question_ts == "900.000000" and pairer.floor() is None


def test_day_files_are_read_lazily_and_threads_span_days():
    """One day at a time, newest first: a thread's replies from newer days wait for their root's day."""
    day = 86_400.0
    root = {"ts": f"{day + 10:.6f}", "user": "U1", "text": "why?", "thread_ts": f"{day + 10:.6f}", "reply_count": 2}
    same_day = {"ts": f"{day + 20:.6f}", "bot_id": BOT, "text": "because", "thread_ts": root["ts"]}
    next_day = {"ts": f"{2 * day + 5:.6f}", "bot_id": BOT, "text": "also", "thread_ts": root["ts"]}
    later = {"ts": f"{2 * day + 50:.6f}", "user": "U2", "text": "hello"}
    orphan = {"ts": f"{2 * day + 60:.6f}", "bot_id": BOT, "text": "late", "thread_ts": "5.000000"}
    read: list[int] = []

    def days():
        for n, content in ((2, [next_day, later, orphan]), (1, [root, same_day])):
            read.append(n)
            yield content

    threads = newest_first_threads(days())
    assert read == []
    first_root, first_replies = next(threads)
    assert (first_root, first_replies, read) == (later, [], [2])  # the older day is not read yet
    second_root, second_replies = next(threads)
    assert (second_root, second_replies, read) == (root, [same_day, next_day], [2, 1])
    assert list(threads) == [(orphan, [])]  # its root is in no day: a thread of its own, at the end


def test_export_reader(tmp_path):
    path = tmp_path / "e.zip"
    path.write_bytes(export_zip({"C1": ("support", history_messages("C1", 4))}))
    export = SlackExport(str(path))
    [channel] = export.channels()
    assert channel.name == "support" and export.user_names() == {"U_ASKER": "Ana"}
    days = list(export.days(channel))
    assert sum(len(day) for day in days) == 10
    assert [float(day[0]["ts"]) for day in days] == sorted((float(day[0]["ts"]) for day in days), reverse=True)


def test_export_nested_in_a_folder(tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("acme/channels.json", '[{"id": "C1", "name": "general"}]')
        archive.writestr("acme/general/2026-01-01.json", '[{"ts": "1.0", "user": "U1", "text": "hi"}]')
    path = tmp_path / "n.zip"
    path.write_bytes(buffer.getvalue())
    export = SlackExport(str(path))
    assert [len(day) for day in export.days(export.channels()[0])] == [1]


def test_token_bucket_keeps_the_rate():
    clock = [0.0]
    bucket = TokenBucket(60, clock=lambda: clock[0], sleep=lambda s: clock.__setitem__(0, clock[0] + s))
    for _ in range(5):
        bucket.take()
    assert clock[0] >= 4.0 - 1e-9 and bucket.calls == 5
