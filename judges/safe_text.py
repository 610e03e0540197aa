"""Text from outside (a question, an answer, an imported file) made safe for the outputs relmon writes: a terminal,
Markdown, JUnit XML and JSON files. Anyone can type anything into Slack, or into a set they hand to
`relmon golden import`, and no text may break a report or act on the terminal that shows it.

What is unsafe: the C0 controls but tab and newline (ESC starts a terminal escape; XML 1.0 forbids them all but
tab, newline and carriage return), DEL, the C1 controls (U+009B is a one-character escape on some terminals), lone
surrogates (not characters: they cannot be written as UTF-8), U+FFFE and U+FFFF (XML 1.0 forbids them), and the
bidirectional overrides and isolates that reorder what a line shows ("Trojan Source").

It sits with the judges (as judges.jsonl does), on the lowest layer, so that every layer reading or writing such
text (golden's imports, topics' drafts, the command's reports) uses this one rule."""

from __future__ import annotations

import json
import re
from typing import Any

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff\u202a-\u202e\u2066-\u2069]")
# In JSON: the unsafe characters json.dumps leaves as they are with ensure_ascii=False, and the two line separators
# that end a line in JavaScript. Written as \\u escapes, which read back as the same characters.
_JSON_ESCAPED = re.compile("[\x7f-\x9f\ud800-\udfff\ufffe\uffff\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_CONTROL_PICTURES = 0x2400  # U+2400..U+241F picture the C0 controls: ESC shows as ␛
_REPLACEMENT = "\ufffd"


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(_CONTROL_PICTURES + code)
    if code == 0x7F:
        return "\u2421"  # ␡
    if 0xD800 <= code <= 0xDFFF:
        return _REPLACEMENT  # half of a character: nothing to show
    return f"<U+{code:04X}>"


def visible(text: str | None) -> str:
    """The text with every unsafe character shown instead of acting: C0 controls as their pictures (ESC as ␛,
    a carriage return as ␍), a lone surrogate as U+FFFD, the others as `<U+009B>`. Tab and newline stay. Safe in
    a terminal and in XML 1.0."""
    return _UNSAFE.sub(_shown, text or "")


def one_line(text: str | None, width: int | None = None) -> str:
    """`visible`, with runs of whitespace (newlines too) as one space, cut to `width` characters with an ellipsis."""
    flat = " ".join(visible(text).split())
    if width is None or len(flat) <= width:
        return flat
    return flat[: width - 1] + "…"


def markup_safe(text: str | None, width: int | None = None) -> str:
    """A whole rich table cell or `Console.print` argument: on one line, unsafe characters shown, and rich's markup
    (`[/]`, `[link=…]`) escaped so it is printed as typed, not obeyed. (rich's escape also doubles a trailing
    backslash, for markup written after it; none is, here, and a doubled one would be printed.)"""
    from rich.markup import escape

    flat = one_line(text, width)
    escaped = escape(flat)
    lone_trailing_backslash = flat.endswith("\\") and not flat.endswith("\\\\")
    return escaped[:-1] if lone_trailing_backslash else escaped


def json_text(value: Any, *, indent: int | None = None) -> str:
    """JSON that any reader takes back intact (`json.loads` returns the same strings): readable UTF-8 for
    ordinary text, and every unsafe character as a \\u escape, so a file shown with `cat` cannot act on the
    terminal and a lone surrogate cannot stop the file being written as UTF-8."""
    dumped = json.dumps(value, ensure_ascii=False, indent=indent)
    return _JSON_ESCAPED.sub(lambda match: f"\\u{ord(match.group()):04x}", dumped)


def not_text(text: str) -> str | None:
    """Why an input text cannot be stored, or None: a NUL (PostgreSQL's text refuses it) or a lone surrogate
    (half of a character: it cannot be written as UTF-8)."""
    if "\x00" in text:
        return "a NUL character (\\u0000)"
    if match := re.search("[\ud800-\udfff]", text):
        return f"a lone surrogate (\\u{ord(match.group()):04x}), half of a character"
    return None
