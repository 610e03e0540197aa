"""Logging and Sentry, built so that neither ever carries a question, an answer or a token: `scrub` (secret
masking and message scrubbing), `logs` (JSON lines, `event_fields`), `sentry` (error reports)."""
