"""What a forgetting reaches beyond relmon's own rows (workers.tasks.forgetting): the verdicts sent to the trace tools
about the changed pairs (their comments blanked, `workers.trace_forgetting`) and the posted digests that may quote
them (redrawn, `workers.digest.redraw`). Found inside the forgetting's transaction and noted before it commits
(common.task_notes: a worker that dies after the commit leaves them to the orphan check, since a run again finds
nothing left to change), queued once it has."""

from __future__ import annotations

import logging
import time
from collections.abc import Collection
from dataclasses import dataclass, field

import redis
from sqlalchemy.orm import Session

from capture.forgetting import DELETED_MARK, REMOVED_MARK
from common import task_names, task_notes
from common.runtime import Runtime
from store import digests as digest_rows
from store.forget_plan import ForgetPlan
from workers.trace_forgetting import note_blanking
from workers.trace_sending import Send, queue_sends

log = logging.getLogger("relmon.forget")


@dataclass(frozen=True)
class Elsewhere:
    blanking: list[Send] = field(default_factory=list)  # trace sends that blank a verdict's comment
    redraws: list[task_notes.Call] = field(default_factory=list)  # posted digests to redraw


def found_elsewhere(runtime: Runtime, session: Session, plan: ForgetPlan, thread_pairs: Collection[int]) -> Elsewhere:
    """In the forgetting's transaction, after its plan is applied and the other copies scrubbed: the copies outside
    relmon's rows, noted. `thread_pairs`: the pairs of the message's thread, whose topics' names may have changed."""
    digests = digest_rows.posted_covering(session, plan.about, thread_pairs, (DELETED_MARK, REMOVED_MARK))
    redraws = [task_notes.Call(task_names.REDRAW_DIGEST, (digest_id,)) for digest_id in digests]
    try:
        task_notes.note(runtime.redis, redraws, time.time())
    except redis.RedisError as error:  # the forgetting goes on; only a lost message would go unredrawn
        log.warning("digest redraws not noted", extra={"digests": len(redraws), "error": type(error).__name__})
    return Elsewhere(note_blanking(runtime, list(plan.judgments)) if plan.judgments else [], redraws)


def reach_elsewhere(runtime: Runtime, elsewhere: Elsewhere) -> None:
    """Once the forgetting committed: blank the comments, redraw the digests (each a task of its own, retried)."""
    queue_sends(runtime, elsewhere.blanking)
    now = time.time()
    for call in elsewhere.redraws:
        try:
            task_notes.send(runtime.redis, call, now)
        except Exception as error:  # the broker: the note stays for the orphan check
            log.warning("digest redraw not queued", extra={"task": call.task, "error": type(error).__name__})
