"""The names of relmon's Celery tasks: a contract between the processes that enqueue (the bot, beat) and the
workers that run them. The bot sends tasks by these names and imports nothing from `workers/`."""

SETTLE_PAIR = "workers.tasks.capture.settle_pair"
JUDGE_PAIR = "workers.tasks.judging.judge_pair"
REQUEUE_STALE = "workers.tasks.judging.requeue_stale"
CONSIDER_ALERT = "workers.tasks.slack.consider_alert"
FLUSH_ALERT_SUMMARIES = "workers.tasks.slack.flush_alert_summaries"
REFRESH_ALERT_VOTES = "workers.tasks.slack.refresh_alert_votes"
DELIVER_VERDICT = "workers.tasks.slack.deliver_verdict"
SEND_DIGEST = "workers.tasks.digest.send_digest"
SEND_DIGEST_PREVIEW = "workers.tasks.digest.send_digest_preview"
PURGE_OLD = "workers.tasks.maintenance.purge_old"
RUN_CANARY = "workers.tasks.canary.run_canary"
