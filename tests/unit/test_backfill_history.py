"""Pure pairing over history pages and the export reader."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator

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


def test_every_exchange_pairs_whether_threaded_or_top_level():
    found = pair_all(history_messages("C", 6))
    assert len(found) == 6
    assert {p.question_text for p in found} == {f"how do I reset item {i}?" for i in range(6)}


def test_a_threaded_pair_keeps_its_thread():
    found = pair_all(history_messages("C", 6))
    assert all(p.thread_ts for p in found if p.question_text.endswith(("0?", "2?", "4?")))


def test_a_run_of_bot_replies_is_one_answer():
    q = {"ts": "100.000000", "user": "U1", "text": "why?", "thread_ts": "100.000000", "reply_count": 2}
    a1 = {"ts": "101.000000", "bot_id": BOT, "user": "U_SUPPORT", "text": "part one", "thread_ts": "100.000000"}
    a2 = {"ts": "102.000000", "bot_id": BOT, "user": "U_SUPPORT", "text": "part two", "thread_ts": "100.000000"}
    found = pair_all([q, a1, a2])
    assert [(p.answer_ts, p.answer_text) for p in found] == [("101.000000", "part one\npart two")]


def test_a_reply_under_a_deleted_question_pairs_nothing():
    tomb = {"ts": "50.000000", "subtype": "tombstone", "text": "This message was deleted.", "thread_ts": "50.000000"}
    a3 = {"ts": "51.000000", "bot_id": BOT, "user": "U_SUPPORT", "text": "orphan", "thread_ts": "50.000000"}
    assert pair_all([tomb, a3]) == []


def _feed_a_top_level_exchange() -> list[tuple[list, str | None]]:
    """A top-level answer, its question, then a message older than the window, fed newest first: what each
    feed returns, with the pairer's floor after it."""
    pairer = HistoryPairer(600.0)
    steps = []
    for raw in (
        {"ts": "1000.000000", "bot_id": BOT, "text": "yes"},
        {"ts": "900.000000", "user": "U1", "text": "ok?"},
        {"ts": "10.000000", "user": "U1", "text": "old"},
    ):
        pairs = pairer.feed([read_message(raw, [BOT], Identity())])
        steps.append((pairs, pairer.floor()))
    return steps


def test_a_top_level_answer_pairs_only_once_the_history_passed_its_window():
    (answered, _), (asked, _), (older, _) = _feed_a_top_level_exchange()
    assert answered == [] and asked == []
    [pair] = older
    assert pair.question_ts == "900.000000"


def test_the_floor_holds_a_top_level_answer_until_it_is_paired():
    (_, while_waiting), _, (_, once_paired) = _feed_a_top_level_exchange()
    assert while_waiting == "1000.000000" and once_paired is None


DAY = 86_400.0
ROOT = {"ts": f"{DAY + 10:.6f}", "user": "U1", "text": "why?", "thread_ts": f"{DAY + 10:.6f}", "reply_count": 2}
SAME_DAY = {"ts": f"{DAY + 20:.6f}", "bot_id": BOT, "text": "because", "thread_ts": ROOT["ts"]}
NEXT_DAY = {"ts": f"{2 * DAY + 5:.6f}", "bot_id": BOT, "text": "also", "thread_ts": ROOT["ts"]}
LATER = {"ts": f"{2 * DAY + 50:.6f}", "user": "U2", "text": "hello"}
ORPHAN = {"ts": f"{2 * DAY + 60:.6f}", "bot_id": BOT, "text": "late", "thread_ts": "5.000000"}


def two_days(read: list[int]) -> Iterator[list[dict]]:
    """The day files, newest first, noting in `read` each day as it is read."""
    for n, content in ((2, [NEXT_DAY, LATER, ORPHAN]), (1, [ROOT, SAME_DAY])):
        read.append(n)
        yield content


def test_day_files_are_read_lazily_one_day_at_a_time():
    read: list[int] = []
    threads = newest_first_threads(two_days(read))
    assert read == []
    next(threads)
    assert read == [2]  # the older day is not read yet
    next(threads)
    assert read == [2, 1]


def test_a_threads_replies_from_newer_days_wait_for_their_roots_day():
    threads = list(newest_first_threads(two_days([])))
    assert threads[:2] == [(LATER, []), (ROOT, [SAME_DAY, NEXT_DAY])]


def test_a_reply_whose_root_is_in_no_day_is_a_thread_of_its_own_at_the_end():
    threads = list(newest_first_threads(two_days([])))
    assert threads[2:] == [(ORPHAN, [])]


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
    waits = [bucket.take() for _ in range(5)]
    assert waits == [0.0, 1.0, 1.0, 1.0, 1.0] and clock[0] == 4.0  # the first call at once, then one a second


def test_an_askers_top_level_message_is_news_for_their_latest_answer_only():
    """As live (capture.outcomes.watching): U1's top-level message after two answered questions joins the thread
    of the later answer only, within the outcome window; another person's, or one past the window, joins none."""

    def threaded(ts: float, user: str, text: str) -> list[dict]:
        root = {"ts": f"{ts:.6f}", "user": user, "text": text, "thread_ts": f"{ts:.6f}", "reply_count": 1}
        answer = {"ts": f"{ts + 10:.6f}", "bot_id": BOT, "text": "Try this.", "thread_ts": f"{ts:.6f}"}
        return [root, answer]

    messages = [
        *threaded(1000, "U1", "How do I rotate my key?"),
        *threaded(1100, "U1", "How do I delete a project?"),
        {"ts": "1200.000000", "user": "U1", "text": "How do I delete a project? still stuck"},
        {"ts": "1250.000000", "user": "U2", "text": "How do I delete a project too?"},
        {"ts": "3500.000000", "user": "U1", "text": "And one more thing"},
    ]
    pairer = HistoryPairer(600.0, outcome_window=1800.0)
    found = []
    for root, replies in newest_first_threads([messages]):
        logged = [m for m in (read_message(r, [BOT], Identity("U_RELMON")) for r in (root, *replies)) if m]
        found += pairer.feed(logged)
    found += pairer.finish()
    later = {p.answer_ts: [m.ts for m in p.thread if m.seconds > float(p.answer_ts)] for p in found}
    # U1's second question is itself news for the first answer (live: a new question, or a re-ask).
    assert later == {"1010.000000": ["1100.000000"], "1110.000000": ["1200.000000"]}
