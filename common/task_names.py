"""The names of relmon's Celery tasks: a contract between the processes that enqueue (the bot, beat) and the
workers that run them, and the one way tasks reach each other. The bot sends tasks by these names and imports
nothing from `workers/`; a task module imports no other task module. Renaming one strands the messages already
queued under the old name."""

CAPTURE_EVENT = "workers.tasks.events.capture_event"
INGEST_EXCHANGE = "workers.tasks.ingest.ingest_exchange"
INGEST_SIGNAL = "workers.tasks.ingest.ingest_signal"
FORGET_EXCHANGE = "workers.tasks.forgetting.forget_exchange"
FORGET_MESSAGE = "workers.tasks.forgetting.forget_message"
REWRITE_REDIS_AOF = "workers.tasks.forgetting.rewrite_redis_aof"
SETTLE_PAIR = "workers.tasks.capture.settle_pair"
JUDGE_PAIR = "workers.tasks.judging.judge_pair"
REQUEUE_STALE = "workers.tasks.judging.requeue_stale"
REQUEUE_ORPHANS = "workers.tasks.judging.requeue_orphans"
LLM_OUTAGE_TICK = "workers.tasks.outage.outage_tick"
POST_OUTAGE_NOTICE = "workers.tasks.slack.post_outage_notice"
CONSIDER_ALERT = "workers.tasks.slack.consider_alert"
FLUSH_ALERT_SUMMARIES = "workers.tasks.slack.flush_alert_summaries"
REFRESH_ALERT_VOTES = "workers.tasks.slack.refresh_alert_votes"
DELIVER_VERDICT = "workers.tasks.slack.deliver_verdict"
FOLLOW_UP_OUTCOME = "workers.tasks.slack.follow_up_outcome"
WATCH_CHANGES = "workers.tasks.slack.watch_changes"
SEND_DIGEST = "workers.tasks.digest.send_digest"
SEND_DIGEST_PREVIEW = "workers.tasks.digest.send_digest_preview"
PURGE_OLD = "workers.tasks.maintenance.purge_old"
RUN_CANARY = "workers.tasks.canary.run_canary"
OBSERVE_MESSAGE = "workers.tasks.outcomes.observe_message"
OBSERVE_REACTION = "workers.tasks.outcomes.observe_reaction"
CLOSE_DUE_WINDOWS = "workers.tasks.outcomes.close_due_windows"
GOLDEN_FROM_VOTE = "workers.tasks.golden.collect_vote"
GOLDEN_SAVE = "workers.tasks.golden.save_from_modal"
REFRESH_TOPICS = "workers.tasks.topics.refresh_topics"
SEND_LANGFUSE_SCORES = "workers.tasks.traces.send_langfuse_scores"
SEND_OTLP_EVALUATIONS = "workers.tasks.traces.send_otlp_evaluations"
SEND_LANGFUSE_OUTCOME = "workers.tasks.traces.send_langfuse_outcome"
SEND_OTLP_OUTCOME = "workers.tasks.traces.send_otlp_outcome"
SEND_PHOENIX_ANNOTATIONS = "workers.tasks.traces.send_phoenix_annotations"
SEND_PHOENIX_OUTCOME = "workers.tasks.traces.send_phoenix_outcome"
BLANK_LANGFUSE_COMMENTS = "workers.tasks.traces.blank_langfuse_comments"
BLANK_PHOENIX_EXPLANATIONS = "workers.tasks.traces.blank_phoenix_explanations"
REDRAW_DIGEST = "workers.tasks.digest.redraw_digest"
CHECK_AGREEMENT = "workers.tasks.digest.check_agreement"
MARK_FIXED = "workers.tasks.fixes.mark_fixed"

# The tasks that post to Slack (alerts, summaries, votes, verdicts, digests): their own queue, so a backlog of
# judging never holds a post up. Every other task runs on the judge queue (common.celery_app routes them).
POSTING = frozenset(
    {
        CONSIDER_ALERT,
        FLUSH_ALERT_SUMMARIES,
        REFRESH_ALERT_VOTES,
        DELIVER_VERDICT,
        FOLLOW_UP_OUTCOME,
        WATCH_CHANGES,
        SEND_DIGEST,
        SEND_DIGEST_PREVIEW,
        POST_OUTAGE_NOTICE,
        REDRAW_DIGEST,
        CHECK_AGREEMENT,
        MARK_FIXED,
    }
)

# A deletion's work (with the `capture_event` of its event, common.celery_app.route_task): its own queue, so that
# a backlog of judging never holds a deletion past its minute. The blanking of a verdict's comment in the trace
# tools goes there too: it is the deletion reaching a copy.
FORGETTING = frozenset(
    {FORGET_MESSAGE, FORGET_EXCHANGE, REWRITE_REDIS_AOF, BLANK_LANGFUSE_COMMENTS, BLANK_PHOENIX_EXPLANATIONS}
)

# The sends of verdicts and outcome signals to the bot's trace tools (workers.tasks.traces): noted while on their
# way (common.task_notes), since nothing but their message says they are still to do.
TRACE_SENDS = frozenset(
    {
        SEND_LANGFUSE_SCORES,
        SEND_OTLP_EVALUATIONS,
        SEND_LANGFUSE_OUTCOME,
        SEND_OTLP_OUTCOME,
        SEND_PHOENIX_ANNOTATIONS,
        SEND_PHOENIX_OUTCOME,
        BLANK_LANGFUSE_COMMENTS,
        BLANK_PHOENIX_EXPLANATIONS,
    }
)
