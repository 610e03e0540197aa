"""`relmon golden export|import|list|remove`: the golden set on the command line.

The export is an admin's command: whoever runs it reads the database directly, so what it holds is decided here.
Public channels' items are always exported; a private channel's items only with `--for-user U…` (the channels that
person is a member of, as Slack says), `--channel ID` (that channel's) or `--include-private` (all of them: the admin
takes on sharing them only with the channels' members). Every text is
redacted when RELMON_REDACT_PII is on, or with `--redact`: texts typed in Slack's modal and imported sets too."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.client import HTTPException
from pathlib import Path
from typing import Any

from capture.redact import redact
from golden.formats import render_file
from golden.importing import ImportProblem, read_any
from judges.safe_text import markup_safe
from relmon.export import open_output, safe_cell
from relmon.private_items import WITHHELD, text_shown, withheld_note
from store import golden as store
from store.db import Database
from store.golden_import import import_items
from store.golden_models import GoldenItem
from store.settings import Settings

MAX_IMPORT_BYTES = 200 * 1024 * 1024  # a set of a million items fits; a bigger file is a mistake, not a set
_TEXTS = ("question", "context", "expected", "bot_answer")


def as_plain(item: GoldenItem, *, redacting: bool) -> dict[str, Any]:
    """An item as golden.formats reads it, redacted when asked."""
    created = item.created_at if item.created_at.tzinfo else item.created_at.replace(tzinfo=UTC)
    plain = {
        "id": item.id,
        "question": item.question,
        "context": item.context,
        "expected": item.expected,
        "bot_answer": item.bot_answer,
        "topic": item.topic,
        "channel": item.channel_id,
        "private": item.channel_is_private,
        "permalink": item.permalink,
        "times": item.times,
        "origin": item.origin,
        "created_at": created.astimezone(UTC).isoformat(),
    }
    if redacting:
        plain |= {name: redact(plain[name]) if plain[name] else plain[name] for name in _TEXTS}
    return plain


def _with_team_judges(session, settings: Settings, active: list[GoldenItem], items: list[dict[str, Any]]) -> None:
    """Each item's `judges`: the team's judges (RELMON_JUDGES_DIR) with their criteria and the verdict each gave the
    bot's answer the item came from (golden.formats carries them where the format has room)."""
    from golden.formats import judge_entry
    from store.judge_catalog import judge_catalog

    specs = judge_catalog(settings).specs
    if not specs:
        return
    pairs = store.item_pairs(session, active)
    verdicts = store.judge_verdicts(session, pairs.values(), specs)
    for item, plain in zip(active, items, strict=True):
        given = verdicts.get(pairs[item.id], {}) if item.id in pairs else {}
        plain["judges"] = {name: judge_entry(spec, given.get(name)) for name, spec in specs.items()}


@contextmanager
def _database(settings: Settings) -> Iterator[Database]:
    database = Database(settings.resolved_database_url, pool_size=1)
    try:
        database.migrate()
        yield database
    finally:
        database.dispose()


def channels_of_member(settings: Settings, user: str, channels: set[str]) -> set[str]:
    """Of these private channels, those `user` is a member of, as Slack's conversations.members says (a channel
    relmon can no longer see counts as not theirs)."""
    from slack_sdk.errors import SlackApiError

    from common.runtime import slack_client_for

    client, member_of = slack_client_for(settings), set()
    for channel in sorted(channels):
        try:
            pages = client.conversations_members(channel=channel, limit=1000)
            if any(user in page.get("members", []) for page in pages):
                member_of.add(channel)
        except SlackApiError:
            continue
    return member_of


def run_golden_export(args, settings: Settings) -> int:
    allowed = None if args.include_private else set(args.channel or ())
    redacting = settings.redact_pii or args.redact
    with _database(settings) as database, database.session() as session:
        store.fill_topics(session)
        if args.for_user and allowed is not None:
            private = {i.channel_id for i in store.active_items(session, None) if i.channel_is_private and i.channel_id}
            allowed |= channels_of_member(settings, args.for_user, private)
        active = store.active_items(session, allowed)
        items = [as_plain(item, redacting=redacting) for item in active]
        _with_team_judges(session, settings, active, items)
    with open_output(args.output) as out:
        for piece in render_file(items, args.format, cell=safe_cell):
            out.write(piece)
    private = sum(1 for item in items if item["private"])
    note = f", {private} from private channels" if private else ""
    print(f"relmon golden export: {len(items)} item(s){note} as {args.format}", file=sys.stderr)
    return 0


def run_golden_import(args, settings: Settings) -> int:
    path = Path(args.file)
    try:
        if path.stat().st_size > MAX_IMPORT_BYTES:
            print(f"relmon golden import: {path} is over {MAX_IMPORT_BYTES // 2**20} MB: not a set", file=sys.stderr)
            return 2
        rows = read_any(path.read_bytes().decode("utf-8"))
    except OSError as error:
        print(f"relmon golden import: cannot read {path}: {error.strerror}", file=sys.stderr)
        return 2
    except UnicodeDecodeError as error:
        print(f"relmon golden import: {path} is not UTF-8 (byte {error.start}): save it as UTF-8", file=sys.stderr)
        return 2
    except ImportProblem as problem:
        print(f"relmon golden import: {path}: {problem}", file=sys.stderr)
        return 2
    lookup = SlackPermalinks(settings)
    with _database(settings) as database, database.session() as session:
        done = import_items(session, rows, permalink_for=lookup)
    linked = f", {done.linked} asked question(s) linked" if done.linked else ""
    print(
        f"relmon golden import: {done.added} new item(s), {done.updated} updated{linked}, from {len(rows)} record(s)",
        file=sys.stderr,
    )
    if lookup.unreachable:
        print(f"relmon golden import: no permalinks: Slack did not answer ({lookup.unreachable})", file=sys.stderr)
    return 0


class SlackPermalinks:
    """A linked question's permalink, as the workers look it up (chat.getPermalink), when a bot token is set. A
    Slack that does not answer is asked once, not once per question: the links stay empty (a later import, or
    the item's next asking, fills them)."""

    def __init__(self, settings: Settings) -> None:
        self.settings, self.client, self.unreachable = settings, None, ""

    def __call__(self, channel_id: str | None, ts: str | None) -> str | None:
        from slack_sdk.errors import SlackApiError

        from common.runtime import slack_client_for

        if not channel_id or not ts or self.unreachable or not self.settings.secret("slack_bot_token"):
            return None
        self.client = self.client or slack_client_for(self.settings)
        try:
            return self.client.chat_getPermalink(channel=channel_id, message_ts=ts).get("permalink")
        except SlackApiError:  # that message (deleted, a channel relmon left): no link, the others may have one
            return None
        except (OSError, HTTPException) as error:  # the network, a timeout: Slack is not reachable from here
            self.unreachable = type(error).__name__
            return None


def run_list(args, settings: Settings) -> int:
    from rich.console import Console
    from rich.table import Table

    from common.channel_names import channel_names
    from common.messages.readable import Readable
    from common.runtime import slack_client_for

    withheld = 0
    with _database(settings) as database:
        with database.reading() as session:
            items = store.active_items(session, None)
        slack = slack_client_for(settings) if settings.slack_bot_token else None
        readable = Readable(settings.timezone, channel_names(database, [i.channel_id for i in items], slack))
        table = Table("id", "question", "expected", "times", "origin", "channel", title="The golden set")
        for item in items:
            if text_shown(item.channel_is_private, include_private=args.include_private):
                question, expected = markup_safe(item.question, 60), markup_safe(item.expected or "—", 60)
            else:  # listed (its id is what `relmon golden remove` takes), its words left out
                question, expected, withheld = WITHHELD, WITHHELD, withheld + 1
            table.add_row(str(item.id), question, expected, str(item.times), markup_safe(item.origin),
                          markup_safe(readable.channel(item.channel_id) if item.channel_id else ""))  # fmt: skip
    console = Console()
    console.print(table)
    if note := withheld_note(withheld):
        console.print(note)
    return 0


def run_remove(args, settings: Settings) -> int:
    with _database(settings) as database, database.session() as session:
        removed = store.remove_item(session, args.item_id, "cli", datetime.now(UTC))
    if not removed:  # an id that is not in the set: an input error (2), as for every command
        print(f"relmon golden remove: no item {args.item_id} in the set", file=sys.stderr)
        return 2
    print(f"relmon golden remove: item {args.item_id} removed", file=sys.stderr)
    return 0


def run_golden(args, settings: Settings) -> int:
    action = {"export": run_golden_export, "import": run_golden_import, "list": run_list, "remove": run_remove}
    return action[args.golden_command](args, settings)
