"""Who may read a topic's name where it is shown: the audience rule of the topics, pure.

A topic's name is made of its questions' words (the LLM reads them; keywords are taken from them), so it is shown
only where every viewer may read every question it was made from. A question's channel may be read:
- anywhere, when it is public and not shared with another organisation (`Question.private` is False: Slack Connect
  channels are stored as private): the whole workspace may open it;
- in that very channel (its viewers are its members), and by one person there only if they are a member;
- where the quoting rule lets a private channel's text be quoted (`common.privacy.may_quote`: the alert channel
  the channel's own rule names, with quoting on), passed in as `Place.quotes_private`;
- by the operator (`relmon topics` in a terminal), who reads every channel.

So a name is made from public questions when the topic has any (it may then be shown anywhere); else from the
questions the place it is made for may read; else (no such question) it gets `NEUTRAL_NAME`, and no LLM reads them.
A stored name remembers the private channels it was made from (`sources`; () = public questions only, None =
unknown: made before this rule), and wherever those are not all readable it is shown as `NEUTRAL_NAME`. A topic
whose name was made from narrower-audience questions than it now has (it gained public questions, or is shown
where its name may not be read but some of its questions may) is named again (`keeps_name`).

Examples are quotes: they follow the quoting rule (`common.privacy.may_quote`), which is never wider than this one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from topics.questions import Question

NEUTRAL_NAME = "Unnamed private topic"
NAMING_QUESTIONS = 5  # questions in the naming prompt (topics.naming.EXAMPLES)

Sources = tuple[str, ...]  # the private channels a name was made from; () public questions only


def _nobody(_channel: str) -> bool:
    return False


@dataclass(frozen=True)
class Place:
    """Where a topic's name is shown. `channel_id`: the channel it is posted in (the digest channel, the
    conversation a preview appears in); None for App Home or a terminal. `reader_may_read`: one person reads it
    (App Home, a preview): whether they are a member of a channel. `quotes_private`: whether the quoting rule lets a
    private channel's text be quoted here. `operator`: the operator's terminal, which reads every channel."""

    channel_id: str | None = None
    reader_may_read: Callable[[str], bool] | None = None
    quotes_private: Callable[[str], bool] = field(default=_nobody)
    operator: bool = False

    @classmethod
    def terminal(cls) -> Place:
        return cls(operator=True)


def may_read(channel_id: str | None, private: bool, place: Place) -> bool:
    """Whether every viewer of `place` may read a question of `channel_id` (see the module's docstring)."""
    if not private or place.operator:
        return True
    if channel_id is None:
        return False
    if place.reader_may_read is not None and not place.reader_may_read(channel_id):
        return False
    return channel_id == place.channel_id or place.quotes_private(channel_id)


def name_readable(sources: Sources | None, place: Place) -> bool:
    """Whether a name made from the private channels `sources` may be shown at `place` (None: unknown, never)."""
    if sources is None:
        return place.operator
    return all(may_read(channel, True, place) for channel in sources)


def shown_name(name: str | None, sources: Sources | None, place: Place) -> str:
    """The name as `place` shows it: itself where it may be read, else `NEUTRAL_NAME`."""
    return name if name and name_readable(sources, place) else NEUTRAL_NAME


@dataclass(frozen=True)
class NamingChoice:
    """The questions a topic is named from and the private channels they come from."""

    questions: tuple[Question, ...]
    sources: Sources


def naming_choice(questions: Sequence[Question], place: Place | None) -> NamingChoice | None:
    """The questions (closest to the topic's centre first, as given) a name is made from, for a run made for
    `place` (None: for no place in particular): public ones when there are any; else those `place` may read; else,
    for the operator or no particular place, those of the one private channel that asked most (a name of one
    channel's words is readable wherever that channel is). None: no question may be read there (a neutral name)."""
    public = [q for q in questions if not q.private]
    if public:
        return NamingChoice(tuple(public[:NAMING_QUESTIONS]), ())
    if place is not None and not place.operator:
        chosen = [q for q in questions if may_read(q.channel_id, q.private, place)][:NAMING_QUESTIONS]
    else:
        asked = Counter(q.channel_id for q in questions if q.channel_id)
        if not asked:
            return None
        top = min(asked, key=lambda channel: (-asked[channel], channel))
        chosen = [q for q in questions if q.channel_id == top][:NAMING_QUESTIONS]
    if not chosen:
        return None
    return NamingChoice(tuple(chosen), tuple(sorted({q.channel_id for q in chosen if q.channel_id})))


def keeps_name(sources: Sources | None, choice: NamingChoice | None, place: Place | None) -> bool:
    """Whether a continuing topic keeps its stored name (made from `sources`; None: unknown) rather than being
    named again from `choice`: unless its audience widened. A name of public questions is kept; an unknown one
    never; a private one is renamed when the topic now has public questions, or when the run's place may not read
    it but may read the new choice."""
    if sources is None:
        return False
    if sources == ():
        return True
    if choice is None:
        return True  # nothing wider to name it from: where it may not be read, it is shown neutral
    if choice.sources == ():
        return False  # public questions now: a name every viewer may read
    if place is None or place.operator:
        return True
    return name_readable(sources, place) or not name_readable(choice.sources, place)
