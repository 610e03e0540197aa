"""`forget_exchange`'s step: an exchange deleted by the bot's side (DELETE /v1/exchanges/{id}) is scrubbed from
every copy relmon keeps, by the machinery that forgets a deleted Slack message (workers.tasks.forgetting): the pure
plan (capture.forgetting.plan_exchange_forget) written in one transaction with the copies made elsewhere (the golden
set's sources and items, topics' names, `relmon regress` checks and reports), then the alerts redrawn without its
words, the trace tools' comments blanked, the digests that list it redrawn, Redis's append-only file rewritten.

The deletion is noted first (workers.exchange_notes): an exchange stored later is not stored, one stored meanwhile
is scrubbed again, and the signals waiting for it are dropped. Idempotent: run again, nothing is left to change.
"""

from __future__ import annotations

import logging
from functools import partial

from capture.forgetting import plan_exchange_forget, plan_regress_forget, removal_of_exchange, scrub_copies
from common.redis_persistence import rewrite_soon
from common.reports.view_cache import forget_views
from common.runtime import Runtime
from store import exchange_forgetting, forgetting, golden
from workers import exchange_notes
from workers.alerts.forgotten import redraw_forgotten
from workers.alerts.policy import summary_key
from workers.forgotten_elsewhere import found_elsewhere, reach_elsewhere

log = logging.getLogger("relmon.forget")


def forget_exchange_in(runtime: Runtime, bot: str, exchange_id: str) -> str:
    """Scrub the exchange (bot, id) from every stored copy; returns what changed."""
    exchange_notes.note_forgotten(runtime.redis, bot, exchange_id)  # before the read: a store after it sees it
    exchange_notes.drop_signals(runtime.redis, bot, exchange_id)  # a handoff's reply is the exchange's words too
    fields = {"bot": bot, "exchange_id": exchange_id}
    with runtime.db.session() as session:
        rows = exchange_forgetting.exchange_rows(session, bot, exchange_id)
        if rows is None:
            log.info("exchange deleted before it was stored", extra=fields)
            return "not stored: noted"
        own = next(pair for pair in rows.pairs if pair.id == rows.pair_id)
        removal = removal_of_exchange(own.question_text, own.answer_text, own.context_text, rows.documents)
        plan = plan_exchange_forget(rows.pair_id, removal, rows.pairs, rows.judgments)
        forgetting.apply_plan(session, plan)
        exchange_forgetting.clear_documents(session, rows.exchange_id)
        pair_ids = [pair.id for pair in rows.pairs]
        # Read through the golden sources, before the deletion below takes them away.
        blanked, checks, reports = forgetting.regress_rows_of_pair(session, rows.pair_id, pair_ids)
        regress = plan_regress_forget(removal, blanked, checks, reports)
        forgetting.apply_regress_plan(session, regress)
        forgetting.scrub_other_copies(session, rows.channel_id, pair_ids, partial(scrub_copies, removal=removal))
        golden.forget_sources_of_pair(session, rows.pair_id)
        redraw = forgetting.note_on_alerts(session, plan.about)
        forgetting.force_summary_redraw(session, {summary_key(alert_channel, at) for alert_channel, at in redraw.held})
        elsewhere = found_elsewhere(runtime, session, plan, pair_ids)
    forget_views(runtime.redis)  # a cached digest preview may quote it
    redraw_forgotten(runtime, redraw, plan.about)
    reach_elsewhere(runtime, elsewhere)
    rewrite_soon(runtime.redis)  # the task notes that carried it, in Redis's append-only file
    log.info(
        "exchange forgotten",
        extra={
            **fields,
            "pair_id": rows.pair_id,
            "pairs": len(plan.pairs),
            "judgments": len(plan.judgments),
            "regress_checks": len(regress.checks),
            "alerts": len(redraw.posted),
        },
    )
    return f"pairs: {len(plan.pairs)}; judgments: {len(plan.judgments)}; alerts: {len(redraw.posted)}"
