"""Integration tests: one part against real services in this process (Redis, SQLite and PostgreSQL, the fakes over
HTTP, signed requests through the Bolt app)."""
