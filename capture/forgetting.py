"""Forgetting: when a message is deleted in Slack (or an edit takes words out of it), which of the texts relmon
keeps must change, and to what. Pure: the stored texts of the pairs of the message's thread and of their judgments
in, the columns to write out (their shapes: `store.forget_plan`). `store.forgetting` reads and writes them;
`workers.tasks.forgetting` runs it.

The rules, one per kind of copy:
- the pair whose question (or whose answer's first message) was deleted loses that text outright, and its
  judgments lose their reasoning, raw output and second opinion's reasoning (judges repeat what they read);
  their scores stay;
- every other copy in the thread (a later pair's earlier turns, a reference, an answer's later part, and the
  judgments of those pairs) has the message's text and its words replaced by a mark;
- an edit takes out only the words it removed (`removal_of_edit`), everywhere the same way;
- the copies made from the thread's pairs elsewhere (golden-set items and their sources, topic names) have the
  message's text and words replaced by the mark the same way (`scrub_copies`);
- `relmon regress`'s rows about the golden items taken from the message or its thread (`plan_regress_forget`): an
  item whose own question, answer or expected answer was deleted has its checks lose their texts whole (as a pair's
  judgments do; marked, so a resumed run judges them again) and its line of each report shows the mark for its
  question; the other items' checks and lines lose the message's text and words.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from store.forget_plan import (
    CHECK_TEXTS,
    DELETED_MARK,
    JUDGMENT_TEXTS,
    PAIR_TEXTS,
    ForgetPlan,
    RegressPlan,
    StoredCheck,
    StoredJudgment,
    StoredPair,
    StoredReport,
    blanked_verdict,
)

K = TypeVar("K", bound=Hashable)
REMOVED_MARK = "[removed]"
_WORD = re.compile(r"\w+", re.UNICODE)
# Of a deleted message's words, those that name or number something (a digit or a capital letter in them: a card
# number, an order, a name, an address) are taken out of the other copies of its thread, wherever they appear (a
# judge's paraphrase); its plain words are not (they would garble the bot's own answer). Its whole text goes wherever
# it was copied verbatim. An edit's removed words all go, whatever they are.
_COMMON = """a an and are as at be but by can do does for from has have he her his how i if in is it its me my no not of
on or our she so that the their them then there they this to up us was we what when where which who why will with you
your yes ok hi hello please thanks thank"""
COMMON_WORDS = frozenset(_COMMON.split())


def words_of(text: str | None) -> set[str]:
    return set(_WORD.findall(text or ""))


@dataclass(frozen=True)
class Removal:
    """What must go from every copy: whole texts (a deleted message's, in every form it was stored in) and words."""

    texts: tuple[str, ...] = ()
    words: frozenset[str] = frozenset()
    deleted: bool = True  # a deletion (else an edit)

    @property
    def mark(self) -> str:
        return DELETED_MARK if self.deleted else REMOVED_MARK

    def __bool__(self) -> bool:
        return bool(self.texts or self.words)


def removal_of_deletion(texts: Iterable[str | None]) -> Removal:
    """A deleted message: every form of its text (raw, redacted, on one line as an earlier turn), and its words
    that name or number something."""
    forms: set[str] = set()
    for text in texts:
        if not text or not text.strip():
            continue
        forms.update({text.strip(), " ".join(text.split())})
        forms.update(line.strip() for line in text.splitlines() if len(line.strip()) >= 8)
    words = {word for text in forms for word in words_of(text) if _names_something(word)}
    return Removal(tuple(sorted(forms, key=len, reverse=True)), frozenset(words), deleted=True)


def _names_something(word: str) -> bool:
    return word.lower() not in COMMON_WORDS and any(c.isdigit() or c.isupper() for c in word)


def removal_of_edit(before: Iterable[str | None], after: str | None) -> Removal:
    """An edit: the words the earlier texts had and the new one lacks. An edit that only adds to the end (a stream
    growing, a word being finished) removes nothing."""
    now = after or ""
    kept = words_of(now)
    removed: set[str] = set()
    for text in before:
        if not text or now.startswith(text.rstrip()):
            continue
        removed |= words_of(text) - kept
    return Removal((), frozenset(removed), deleted=False)


def removal_of_words(texts: Iterable[str]) -> Removal:
    """The words an edit took out, as the bot noted them (`removal_of_edit` on the versions it saw)."""
    return Removal((), frozenset(word for text in texts for word in words_of(text)), deleted=False)


def scrub(text: str | None, removal: Removal) -> str | None:
    """`text` with every whole text and every word of `removal` replaced by its mark (None stays None)."""
    if not text or not removal:
        return text
    for whole in removal.texts:
        text = text.replace(whole, removal.mark)
    if removal.words:
        # Longest first, so that a word is not cut by a shorter one it starts with.
        alternatives = "|".join(re.escape(word) for word in sorted(removal.words, key=len, reverse=True))
        text = re.sub(rf"(?<!\w)(?:{alternatives})(?!\w)", removal.mark, text)
    return text


def scrub_copies(copies: Mapping[K, Mapping[str, str | None]], removal: Removal) -> dict[K, dict[str, str | None]]:
    """Of other rows' texts (row key -> column -> text), the columns that change when `removal` is scrubbed out."""
    changed: dict[K, dict[str, str | None]] = {}
    for key, texts in copies.items():
        changes = {name: scrub(text, removal) for name, text in texts.items() if scrub(text, removal) != text}
        if changes:
            changed[key] = changes
    return changed


def plan_forget(
    ts: str, removal: Removal, pairs: Sequence[StoredPair], judgments: Sequence[StoredJudgment]
) -> ForgetPlan:
    """What changes when the message `ts` is deleted (or edited, per `removal`), given the stored pairs of its
    thread and their judgments."""
    plan = ForgetPlan()
    blanked: set[int] = set()  # pairs whose own question or answer was deleted: their judgments lose their words
    for pair in pairs:
        own = _own_field(pair, ts)
        changes: dict[str, str | None] = {}
        for name in PAIR_TEXTS:
            current = getattr(pair, name)
            new = None if removal.deleted and name == own else scrub(current, removal)
            if new != current:
                changes[name] = new
        if changes:
            plan.pairs[pair.id] = changes
            plan.about[pair.id] = _about(own, removal)
        if removal.deleted and own is not None:
            blanked.add(pair.id)
    scrubbed = set(plan.pairs)
    for judgment in judgments:
        if judgment.pair_id not in scrubbed and judgment.pair_id not in blanked:
            continue
        changes = {}
        for name in JUDGMENT_TEXTS:
            current = getattr(judgment, name)
            new = None if judgment.pair_id in blanked else scrub(current, removal)
            if new != current:
                changes[name] = new
        if changes:
            plan.judgments[judgment.id] = changes
            plan.about.setdefault(judgment.pair_id, _about(_own_field_of(pairs, judgment.pair_id, ts), removal))
    return plan


def _own_field(pair: StoredPair, ts: str) -> str | None:
    """Which of the pair's own texts the message is: its question, or its answer (the answer's first message)."""
    if pair.question_ts == ts:
        return "question_text"
    if pair.answer_ts == ts:
        return "answer_text"
    return None


def _own_field_of(pairs: Sequence[StoredPair], pair_id: int, ts: str) -> str | None:
    return next((_own_field(p, ts) for p in pairs if p.id == pair_id), None)


def _about(own: str | None, removal: Removal) -> str:
    if not removal.deleted:
        return "edit"
    return {"question_text": "question", "answer_text": "answer"}.get(own or "", "message")


def plan_regress_forget(
    removal: Removal, blanked: Collection[str], checks: Sequence[StoredCheck], reports: Sequence[StoredReport]
) -> RegressPlan:
    """What changes in `relmon regress`'s rows when `removal` is taken out: `checks` and `reports` are those about
    the golden items the message's copies reached; `blanked`, the keys of the items whose own question, answer or
    expected answer was the deleted message. Their checks lose their texts (scores and statuses stay) and their
    report lines show the mark for the question; the others' lose the message's text and words."""
    plan = RegressPlan()
    if not removal:
        return plan
    whole = set(blanked) if removal.deleted else set()
    for check in checks:
        if not isinstance(check.verdict, dict):
            continue  # charged, not yet answered: nothing quoted
        if check.item_key in whole:
            verdict = blanked_verdict(check.verdict)
        else:
            verdict = {**check.verdict, **_scrubbed(check.verdict, CHECK_TEXTS, removal)}
        if verdict != check.verdict:
            plan.checks[check.id] = verdict
    for stored in reports:
        items = (stored.report or {}).get("items")
        if not isinstance(items, list):
            continue
        lines = [_report_line(line, whole, removal) for line in items]
        if lines != items:
            plan.reports[stored.run_id] = {**(stored.report or {}), "items": lines}
    return plan


def _scrubbed(texts: Mapping[str, object], names: Iterable[str], removal: Removal) -> dict[str, str | None]:
    return {name: scrub(texts[name], removal) for name in names if isinstance(texts.get(name), str)}


def _report_line(line: object, blanked: Collection[str], removal: Removal) -> object:
    if not isinstance(line, dict):
        return line
    if str(line.get("id")) in blanked:
        return {**line, "question": removal.mark}
    return {**line, **_scrubbed(line, ("question",), removal)}


EXCHANGE_ABOUT = "exchange"  # what an alert redrawn after an exchange's deletion says went (common.messages.forgotten)
_SPEAKER = re.compile(r"^\[\w+\]\s*")  # an earlier turn's line, as judges.context formats it: "[customer] ..."
_NO_MESSAGE = "\x00"  # no Slack message's ts: an exchange's deletion deletes no message of a thread


def removal_of_exchange(
    question: str | None, answer: str | None, context: str | None, documents: Iterable[str]
) -> Removal:
    """An exchange deleted by the bot's side (DELETE /v1/exchanges/{id}): its question, answer, earlier turns (the
    lines of its pair's context, without their speaker) and documents, as a deleted message's text."""
    turns = [_SPEAKER.sub("", line) for line in (context or "").splitlines()]
    return removal_of_deletion([question, answer, *turns, *documents])


def plan_exchange_forget(
    own: int, removal: Removal, pairs: Sequence[StoredPair], judgments: Sequence[StoredJudgment]
) -> ForgetPlan:
    """What changes when an exchange is deleted: its pair (`own`) loses every text and its judgments their words,
    as a deleted question's do; the other pairs of its conversation (`pairs`) and their judgments lose its text and
    words, as the rest of a thread does."""
    plan = plan_forget(
        _NO_MESSAGE, removal, [p for p in pairs if p.id != own], [j for j in judgments if j.pair_id != own]
    )
    for pair in pairs:
        if pair.id == own:
            changes = {name: None for name in PAIR_TEXTS if getattr(pair, name) is not None}
            if changes:
                plan.pairs[own] = changes
    for judgment in judgments:
        if judgment.pair_id == own:
            changes = {name: None for name in JUDGMENT_TEXTS if getattr(judgment, name) is not None}
            if changes:
                plan.judgments[judgment.id] = changes
    plan.about[own] = EXCHANGE_ABOUT
    return plan
