"""Prompt templates: the seed texts kept word for word as package data, filled in one pass, and kept under a
character budget by cutting the user texts (never the instructions); and the constant system messages sent
before them."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Literal

Syntax = Literal["format", "jinja"]

# One regex per placeholder syntax. Filling is a single re.sub over the template, so a value that itself
# contains "{answer}", "{{ input }}" or stray braces is copied verbatim and never re-interpreted.
_PATTERNS: dict[Syntax, re.Pattern[str]] = {
    # str.format style: {name}, with {{ and }} as escaped braces (the relevancy and correctness seeds)
    "format": re.compile(r"\{\{|\}\}|\{(\w+)\}"),
    # Jinja style: {{ name }} (the grounded seed), filled by plain replacement, without a Jinja dependency
    "jinja": re.compile(r"\{\{\s*(\w+)\s*\}\}"),
}


def load_prompt(filename: str) -> str:
    """A text of the package's prompts/ folder."""
    return resources.files("judges").joinpath("prompts", filename).read_text(encoding="utf-8")


# The constant system message every judge sends first: the question, answer and reference are data, never
# instructions. Together with the seed's instructions it is the request's constant prefix, which must reach
# the provider's prompt-caching minimum (OpenAI: 1,024 tokens) to be billed at the cached rate.
SYSTEM_MESSAGE = load_prompt("system.txt").strip()
# For the judges that also read a reference answer. Their seeds' instructions are shorter (correctness: about
# 560 tokens), so this part also carries their constant prefix past the caching minimum: cached input costs
# half, so 1,024 cached tokens cost less than the 700 or so they would pay in full without it.
REFERENCE_SYSTEM_MESSAGE = SYSTEM_MESSAGE + "\n" + load_prompt("system_reference.txt").strip()


def cut_marker(count: int) -> str:
    return f"\n[… cut {count:,} characters …]\n"


def cut_text(text: str, limit: int) -> str:
    """`text` shortened to at most `limit` characters: its head and tail around a visible marker that says how
    much was removed. The head gets two thirds: a question's or answer's opening usually matters most."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - len(cut_marker(len(text))))  # the marker for the largest possible cut is the longest
    head = keep - keep // 3
    tail = keep // 3
    marker = cut_marker(len(text) - keep)
    return text[:head] + marker + (text[len(text) - tail :] if tail else "")


def share_budget(lengths: dict[str, int], budget: int) -> dict[str, int]:
    """Split `budget` characters between fields: short fields keep all they need, the rest is shared equally
    between the long ones (water-filling), so a giant answer does not squeeze out a short question."""
    limits: dict[str, int] = {}
    remaining = budget
    pending = sorted(lengths, key=lambda name: lengths[name])
    for index, name in enumerate(pending):
        share = remaining // (len(pending) - index)
        limits[name] = min(lengths[name], share)
        remaining -= limits[name]
    return limits


# Each text sits between two lines that carry the text's name and a tag: the same tag for every text of one
# request, derived from the texts themselves and found in none of them, so no text can close its own field or
# open another (a fake "### RESPONSE:" heading or a look-alike delimiter is just part of the text). The system
# message tells the judge so.
TAG_LENGTH = 16


def delimiter_tag(values: dict[str, str]) -> str:
    """A tag no value contains: hex digits of a hash of the values (length-prefixed, in name order); rehashed
    with a counter in the astronomically unlikely case one of them holds it."""
    for attempt in range(1_000):
        digest = hashlib.sha256(str(attempt).encode())
        for name in sorted(values):
            for part in (name, values[name]):
                encoded = part.encode("utf-8", "surrogatepass")
                digest.update(len(encoded).to_bytes(8, "big"))
                digest.update(encoded)
        tag = digest.hexdigest()[:TAG_LENGTH]
        if not any(tag in value for value in values.values()):
            return tag
    raise ValueError("no delimiter tag is free of the texts")  # unreachable in practice: 1,000 hashes in a text


def delimited(name: str, text: str, tag: str) -> str:
    return f"<<<BEGIN {name} {tag}>>>\n{text}\n<<<END {name} {tag}>>>"


def delimit(values: dict[str, str]) -> dict[str, str]:
    """Each value between its own delimiter lines, all with one tag: what the template's placeholders get."""
    tag = delimiter_tag(values)
    return {name: delimited(name, text, tag) for name, text in values.items()}


class PromptTooSmall(ValueError):
    """The character budget cannot hold the judge's own instructions plus a minimum of user text."""


@dataclass(frozen=True)
class PromptTemplate:
    text: str
    syntax: Syntax
    placeholders: tuple[str, ...] = field(init=False)
    version: str = field(init=False)
    fixed_length: int = field(init=False)

    def __post_init__(self) -> None:
        names = tuple(dict.fromkeys(m.group(1) for m in _PATTERNS[self.syntax].finditer(self.text) if m.group(1)))
        object.__setattr__(self, "placeholders", names)
        object.__setattr__(self, "version", hashlib.sha256(self.text.encode("utf-8")).hexdigest()[:16])
        object.__setattr__(self, "fixed_length", len(self.render({name: "" for name in names})))

    @classmethod
    def load(cls, filename: str, syntax: Syntax) -> PromptTemplate:
        return cls(load_prompt(filename), syntax)

    def render(self, values: dict[str, str]) -> str:
        """The template with each placeholder's text put in between delimiter lines (`delimit`)."""
        missing = set(self.placeholders) - set(values)
        if missing:
            raise KeyError(f"no value for placeholder(s) {sorted(missing)}")
        values = delimit({name: values[name] for name in self.placeholders})

        def fill(match: re.Match[str]) -> str:
            name = match.group(1)
            if name is None:  # an escaped brace ("{{" or "}}" in format syntax)
                return match.group(0)[0]
            return values[name]

        return _PATTERNS[self.syntax].sub(fill, self.text)

    def render_within(
        self, values: dict[str, str], max_chars: int, min_field_chars: int = 200, preamble_chars: int = 0
    ) -> str:
        """Render with the user texts cut so the whole prompt, with `preamble_chars` of text sent before it (the
        system message), is at most `max_chars` characters."""
        budget = max_chars - preamble_chars - self.fixed_length
        if budget < min_field_chars * len(self.placeholders):
            raise PromptTooSmall(
                f"max_prompt_chars={max_chars:,} leaves no room for the texts: the prompt's own instructions take "
                f"{preamble_chars + self.fixed_length:,} characters (raise RELMON_MAX_PROMPT_CHARS)"
            )
        limits = share_budget({name: len(values[name]) for name in self.placeholders}, budget)
        return self.render({name: cut_text(values[name], limits[name]) for name in self.placeholders})
