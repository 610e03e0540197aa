"""Alert policy and feedback tally: plain functions over plain data (no database, no Slack)."""
