"""Slack messages as readable plain text, for the judge and for people.

A message's words can sit in `text` (mrkdwn with Slack markup), in `blocks` (rich text from the composer,
sections, tables, cards and containers from apps) and in `attachments`. Blocks win over `text` when both
exist, because apps often put only a short notification fallback in `text`; the fallback is read too when
a block is of a type relmon does not read, or the blocks hold only headers. Markup becomes what a reader
sees: `<@U1>` → "@Ana", `<#C1|general>` → "#general", `<https://x|docs>` → "docs (https://x)", `<!here>` → "@here".
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterable
from typing import Any

UserResolver = Callable[[str], str | None]

_MARKUP = re.compile(r"<([^<>\n]+)>")


def _user(user_id: str, resolve_user: UserResolver | None, label: str | None = None) -> str:
    name = resolve_user(user_id) if resolve_user else None
    return "@" + (name or label or user_id)


def _replace_markup(match: re.Match[str], resolve_user: UserResolver | None) -> str:
    inner = match.group(1)
    target, _, label = inner.partition("|")
    if target.startswith("@"):  # <@U123> or legacy <@U123|name>
        return _user(target[1:], resolve_user, label or None)
    if target.startswith("#"):  # <#C123|general> (the name is empty for private channels: <#C123|>)
        return "#" + (label or target[1:])
    if target.startswith("!"):
        command = target[1:]
        if command in ("here", "channel", "everyone"):
            return "@" + command
        if command.startswith("subteam^"):  # <!subteam^S123|@support-team>
            return label or "@" + command.removeprefix("subteam^")
        if command.startswith("date^"):  # <!date^1392734382^{date}|Feb 18, 2014>
            return label or ""
        return label or "@" + command
    if target.startswith("mailto:"):
        return label or target.removeprefix("mailto:")
    if label and label != target:
        return f"{label} ({target})"
    return target


def render_markup(text: str, resolve_user: UserResolver | None = None) -> str:
    """Slack mrkdwn markup to plain text (mentions, channels, links, specials; HTML escapes undone)."""
    if not text:
        return ""
    replaced = _MARKUP.sub(lambda m: _replace_markup(m, resolve_user), text)
    # Slack escapes only &, < and >; unescape after replacing so "&lt;b&gt;" never becomes markup.
    return html.unescape(replaced) if "&" in replaced else replaced


# Rich text ---------------------------------------------------------------------------------------


def _rich_element(element: dict[str, Any], resolve_user: UserResolver | None) -> str:
    kind = element.get("type")
    if kind == "text":
        return element.get("text", "")
    if kind == "link":
        url, label = element.get("url", ""), element.get("text")
        return f"{label} ({url})" if label and label != url else url
    if kind == "user":
        return _user(element.get("user_id", ""), resolve_user)
    if kind == "channel":
        return "#" + element.get("channel_id", "")
    if kind == "usergroup":
        return "@" + element.get("usergroup_id", "")
    if kind == "broadcast":
        return "@" + element.get("range", "here")
    if kind == "emoji":
        return f":{element.get('name', '')}:"
    if kind == "date":
        return element.get("fallback", "")
    if kind == "color":
        return element.get("value", "")
    return element.get("text", "")


def _inline(elements: Iterable[dict[str, Any]], resolve_user: UserResolver | None) -> str:
    return "".join(_rich_element(e, resolve_user) for e in elements)


def _rich_block_element(element: dict[str, Any], resolve_user: UserResolver | None) -> str:
    kind = element.get("type")
    children = element.get("elements", [])
    if kind == "rich_text_section":
        return _inline(children, resolve_user)
    if kind == "rich_text_preformatted":
        return "```\n" + _inline(children, resolve_user).strip("\n") + "\n```"
    if kind == "rich_text_quote":
        return "\n".join("> " + line for line in _inline(children, resolve_user).split("\n"))
    if kind == "rich_text_list":
        indent = "  " * int(element.get("indent", 0) or 0)
        ordered = element.get("style") == "ordered"
        start = int(element.get("offset", 0) or 0)
        lines = []
        for number, item in enumerate(children, start=start + 1):
            bullet = f"{number}." if ordered else "-"
            lines.append(f"{indent}{bullet} {_rich_block_element(item, resolve_user)}")
        return "\n".join(lines)
    return _inline(children, resolve_user)


def _rich_text(block: dict[str, Any], resolve_user: UserResolver | None) -> str:
    # Sections carry their own newlines; lists, quotes and code blocks are paragraphs of their own.
    out = ""
    for element in block.get("elements", []):
        part = _rich_block_element(element, resolve_user)
        if element.get("type") == "rich_text_section":
            out += part
        else:
            if out and not out.endswith("\n"):
                out += "\n"
            out += part + "\n"
    return out.strip("\n")


def _text_object(obj: dict[str, Any] | str | None, resolve_user: UserResolver | None) -> str:
    """A text object ({type, text}); newer blocks may carry a plain string where a text object goes."""
    if not obj:
        return ""
    if isinstance(obj, str):
        return obj
    text = obj.get("text", "")
    return render_markup(text, resolve_user) if obj.get("type") == "mrkdwn" else text


# Blocks that show no words of their own: nothing is missed when relmon skips them.
_SILENT_BLOCKS = frozenset({"divider", "image", "actions", "input", "file", "video", "call"})


class _Reading:
    """What reading a message's blocks found: the paragraphs, whether some block was of a type relmon does
    not read (then the message's `text` fallback is read too), and whether anything but headers had words."""

    def __init__(self, resolve_user: UserResolver | None) -> None:
        self.resolve_user = resolve_user
        self.paragraphs: list[str] = []
        self.unread = False
        self.body = False

    def add(self, text: str, *, header: bool = False) -> None:
        if text and text.strip():
            self.paragraphs.append(text)
            self.body = self.body or not header

    def cell(self, cell: dict[str, Any] | str) -> str:
        """A table cell: raw_text, raw_number or rich_text."""
        if isinstance(cell, str):
            return cell
        if cell.get("type") == "rich_text":
            return _rich_text(cell, self.resolve_user).replace("\n", " ")
        if cell.get("type") == "raw_number":
            return str(cell.get("text") or cell.get("value", ""))
        return _text_object(cell, self.resolve_user)

    def rows(self, rows: Iterable[Any]) -> None:
        for row in rows or []:
            cells = row.get("cells", []) if isinstance(row, dict) else row
            self.add(" | ".join(self.cell(c) for c in cells or []))

    def blocks(self, blocks: Iterable[dict[str, Any]] | None) -> None:
        for block in blocks or []:
            self.block(block)

    def block(self, block: dict[str, Any]) -> None:
        kind, resolve_user = block.get("type"), self.resolve_user
        if kind == "rich_text":
            self.add(_rich_text(block, resolve_user))
        elif kind == "header":
            self.add(_text_object(block.get("text"), resolve_user), header=True)
        elif kind == "section":
            self.add(_text_object(block.get("text"), resolve_user))
            self.add("\n".join(f for f in (_text_object(f, resolve_user) for f in block.get("fields", [])) if f))
        elif kind == "context":
            items = [_text_object(e, resolve_user) for e in block.get("elements", []) if e.get("type") != "image"]
            self.add(" ".join(i for i in items if i))
        elif kind in ("markdown", "alert"):  # the markdown block takes standard Markdown, no Slack markup
            self.add(_text_object(block.get("text"), resolve_user))
        elif kind in ("table", "data_table"):
            self.add(block.get("caption", ""), header=True)
            self.rows(block.get("rows", []))
        elif kind == "card":
            for key in ("title", "subtitle", "body"):
                self.add(_text_object(block.get(key), resolve_user), header=key != "body")
        elif kind == "container":
            title = block.get("rich_text_title")
            self.add(_rich_text(title, resolve_user) if title else _text_object(block.get("title"), resolve_user))
            self.add(_text_object(block.get("subtitle"), resolve_user))
            self.blocks(block.get("child_blocks"))
        elif kind == "carousel":
            self.blocks(block.get("elements"))
        elif kind in ("task_card", "plan"):
            self.add(_text_object(block.get("title"), resolve_user), header=True)
            for key in ("details", "output"):
                if isinstance(block.get(key), dict):
                    self.block(block[key])
            self.blocks(block.get("tasks"))
        elif kind not in _SILENT_BLOCKS:
            self.unread = True

    def text(self) -> str:
        return "\n".join(self.paragraphs)


def read_blocks(blocks: Iterable[dict[str, Any]] | None, resolve_user: UserResolver | None = None) -> _Reading:
    reading = _Reading(resolve_user)
    reading.blocks(blocks)
    return reading


def blocks_text(blocks: Iterable[dict[str, Any]] | None, resolve_user: UserResolver | None = None) -> str:
    """The words in Block Kit blocks, wherever they nest: rich text, sections (text and fields), headers,
    context, markdown, tables and data tables, cards, containers, carousels, task and plan blocks."""
    return read_blocks(blocks, resolve_user).text()


def body_text(message: dict[str, Any], resolve_user: UserResolver | None = None) -> str:
    """The blocks' words, and the `text` fallback too when a block is of a type relmon does not read or the
    blocks hold nothing but headers (a fallback already among the blocks' words is not repeated)."""
    reading = read_blocks(message.get("blocks"), resolve_user)
    fallback = render_markup(message.get("text", "") or "", resolve_user).strip()
    said = reading.text()
    if not said.strip():
        return fallback
    if (reading.body and not reading.unread) or not fallback or fallback in said:
        return said
    return said + "\n" + fallback


def attachments_text(attachments: Iterable[dict[str, Any]] | None, resolve_user: UserResolver | None = None) -> str:
    """Legacy attachments: pretext, title, text and fields; the fallback only when nothing else is there."""
    paragraphs: list[str] = []
    for attachment in attachments or []:
        parts = [
            render_markup(attachment.get(key, ""), resolve_user)
            for key in ("pretext", "title", "text")
            if attachment.get(key)
        ]
        for item in attachment.get("fields", []) or []:
            title, value = item.get("title", ""), render_markup(item.get("value", ""), resolve_user)
            parts.append(f"{title}: {value}" if title else value)
        if attachment.get("blocks"):
            parts.append(blocks_text(attachment["blocks"], resolve_user))
        if not any(p.strip() for p in parts) and attachment.get("fallback"):
            parts.append(render_markup(attachment["fallback"], resolve_user))
        paragraphs.append("\n".join(p for p in parts if p))
    return "\n".join(p for p in paragraphs if p.strip())


def files_text(files: Iterable[dict[str, Any]] | None) -> str:
    names = [f.get("title") or f.get("name") or f.get("id", "file") for f in files or []]
    return "\n".join(f"[file: {name}]" for name in names)


def message_text(message: dict[str, Any], resolve_user: UserResolver | None = None) -> str:
    """A Slack message (event or API shape) as plain text: blocks or text, then attachments, then files."""
    try:
        attached = attachments_text(message.get("attachments"), resolve_user)
        parts = [body_text(message, resolve_user), attached, files_text(message.get("files"))]
        return "\n".join(p.strip("\n") for p in parts if p and p.strip())
    except (TypeError, AttributeError, ValueError):
        # Parts of a shape Slack never sends (a fuzzer's, or a future block type): keep the plain text, so one odd
        # message in the conversation log cannot fail every later capture in its thread with a 500.
        text = message.get("text")
        return render_markup(text, resolve_user).strip() if isinstance(text, str) else ""


# Only the fields that carry words are kept in the conversation log.
CONTENT_KEYS = ("text", "blocks", "attachments", "files")


def content_of(message: dict[str, Any]) -> dict[str, Any]:
    """The parts of a message that `message_text` reads, with files reduced to their names."""
    content: dict[str, Any] = {k: message[k] for k in ("text", "blocks", "attachments") if message.get(k)}
    if isinstance(message.get("files"), list):
        content["files"] = [
            {k: f.get(k) for k in ("id", "name", "title") if f.get(k)} for f in message["files"] if isinstance(f, dict)
        ]
    return content
