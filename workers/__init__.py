"""Celery workers: tasks, alert policy, digest computation, beat schedule and the Slack messages they post."""
