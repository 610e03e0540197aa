"""Names for a run's topics: the adapter around `topics.naming` that `topics.service` calls once the topics are
built.

Each name is made only from questions every viewer of where the run is shown may read (`topics.audience`). A new
(or widened) topic is named by the judge LLM, each call paid from the daily budget first (`charge`); its name is
checked (`topics.naming.name_problem`) and, when it fails, asked for once more in the same conversation saying what
was wrong; a second failure, a spent budget or a failed endpoint leaves the topic its keyword name, and the run's
notes say so with a fixed sentence (`topics.failures`)."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from judges import LLMClient, TransientLLMError
from judges.client import LLMReply, LLMRequestError
from topics.audience import NEUTRAL_NAME, NamingChoice, Place, keeps_name, naming_choice
from topics.build import Topic, named
from topics.failures import BUDGET_SPENT, error_kind, llm_error, naming_fallback_note, unusable_names_note
from topics.naming import keyword_names, name_problem, naming_messages, parse_name
from topics.questions import Question

log = logging.getLogger("relmon.topics")


class BudgetSpent(Exception):
    """The daily budget allows no more LLM calls today."""


@dataclass
class Spend:
    """What a run's calls of one kind used (embedding, naming)."""

    calls: int = 0
    prompt: int = 0
    completion: int = 0
    cached: int = 0

    def add(self, reply: LLMReply) -> None:
        self.calls += 1
        self.prompt += reply.prompt_tokens or 0
        self.completion += reply.completion_tokens or 0
        self.cached += reply.cached_tokens or 0


@dataclass
class NamingDeps:
    llm: Callable[[], LLMClient] | None  # the judge model's client (None: keyword names)
    charge: Callable[[], None]  # pays one LLM call from the budget, or raises BudgetSpent
    place: Place | None = None  # where the run is shown: whom names are made for


def topic_key(topic: Topic) -> str:
    """A new topic's key, from the questions closest to its centre: the same run repeated gives the same key."""
    return hashlib.sha1(",".join(map(str, topic.anchors)).encode()).hexdigest()[:16]


def closest_first(topic: Topic) -> list[Question]:
    """The topic's questions, its examples (closest to its centre, failed first) before the others."""
    first = {q.pair_id for q in topic.examples}
    return [*topic.examples, *(q for q in topic.questions if q.pair_id not in first)]


def keyword_pool(topic: Topic, choice: NamingChoice | None) -> list[str]:
    """The texts a keyword name is taken from: of the same audience as `choice` (the questions an LLM would read)."""
    if choice is None:
        return []
    if choice.sources == ():
        pool = [q.text for q in topic.questions if not q.private]
    else:
        pool = [q.text for q in topic.questions if q.private and q.channel_id in choice.sources]
    return pool[:50]


def ask_name(client: LLMClient, examples: Sequence[str], charge: Callable[[], None], spend: Spend) -> str | None:
    """The LLM's name for a topic of `examples`, checked (`topics.naming.name_problem`): asked once more, saying
    what was wrong, when it fails the check; None when the second reply fails too. Each call is paid first."""
    rejected = None
    for attempt in (1, 2):
        charge()
        reply = client.complete(naming_messages(examples, rejected))
        spend.add(reply)
        name = parse_name(reply.text)
        problem = name_problem(name)
        if problem is None:
            return name
        # The problem only: the name is made of the questions' words.
        log.warning("a topic name from the LLM failed the check", extra={"problem": problem, "attempt": attempt})
        rejected = (reply.text, problem)
    return None


def name_topics(
    topics: Sequence[Topic],
    deps: NamingDeps,
    spend: Spend,
    notes: list[str],
    named_by: Mapping[str, str] | None = None,
) -> tuple[Topic, ...]:
    """Names for the topics, each made only from questions every viewer of where it is shown may read
    (`topics.audience`): a continuing topic keeps its own unless its audience widened or it fails the check (one
    named by keywords is asked again), a new or widened one is named by the judge LLM (`ask_name`), else by its
    keywords; a topic none of whose questions may be read where this run is shown gets the neutral name, and no
    LLM reads them. `named_by`: how each earlier topic (by key) was named. The LLM's use goes to `spend`, what to
    say to `notes`."""
    place = deps.place
    earlier = named_by or {}
    choices = [naming_choice(closest_first(topic), place) for topic in topics]
    fallback = keyword_names([keyword_pool(topic, choice) for topic, choice in zip(topics, choices, strict=True)])
    client = None
    failed_why = None
    unusable = 0
    out = []
    for topic, choice, keywords in zip(topics, choices, fallback, strict=True):
        stored_by = earlier.get(topic.key or "")
        key = topic.key or topic_key(topic)
        keep = (
            topic.key is not None
            and topic.name is not None
            and stored_by != "neutral"
            and keeps_name(topic.name_sources, choice, place)
        )
        if keep and stored_by != "keywords" and name_problem(topic.name) is not None:
            keep = False  # a name stored before names were checked ("A" reached a digest): made again
        kept_by = "keywords" if stored_by == "keywords" else "history"
        if keep and (stored_by != "keywords" or failed_why or deps.llm is None or choice is None):
            out.append(named(topic, key, topic.name or NEUTRAL_NAME, kept_by, topic.name_sources))
            continue
        if choice is None:
            out.append(named(topic, key, NEUTRAL_NAME, "neutral", ()))
            continue
        name = None
        if failed_why is None and deps.llm is not None:
            try:
                client = client or deps.llm()
                name = ask_name(client, [q.text for q in choice.questions], deps.charge, spend)
                unusable += name is None
            except BudgetSpent:
                failed_why = BUDGET_SPENT
            except (TransientLLMError, LLMRequestError, ValueError) as error:
                failed_why = llm_error(error)
                log.warning("a topic could not be named by the LLM", extra={"kind": error_kind(error)})
        if name:
            out.append(named(topic, key, name, "llm", choice.sources))
        elif keep:
            out.append(named(topic, key, topic.name or NEUTRAL_NAME, kept_by, topic.name_sources))
        else:
            out.append(named(topic, key, keywords, "keywords", choice.sources))
    if failed_why:
        notes.append(naming_fallback_note(failed_why))
    if unusable:
        notes.append(unusable_names_note(unusable))
    return tuple(out)
