"""What the Slack app (bot/) and the Celery workers (workers/) share: the per-process runtime, the Celery app and
its configuration, telemetry, private replies, Block Kit rendering and the report figures."""
