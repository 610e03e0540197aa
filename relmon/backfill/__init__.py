"""`relmon backfill` (Slack's history) and `relmon import` (a workspace export): judge the past in one run."""
