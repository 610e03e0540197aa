"""`relmon doctor`: check every outside dependency and say, for each, what is wrong and how to fix it.

One line per check (`ok`, `warn`, `FAIL` or `skip`), secrets masked; exit code 1 when any check fails (a `warn`
is worth a look but not a broken deployment: a quiet support bot, a rate-limited history read). The checks are
plain functions returning `Check` values, so each can be tested against the fakes on its own: `checks` (the
settings, Redis, the database, the LLM), `embeddings_check` (the topics' embeddings endpoint and which embeddings
they use), `slack_checks` (token, scopes, app token, channel membership), `channels` (which channels the settings
name), `slack_bots` (the bots seen, read within bounds), `metrics_check` (the bot's /metrics), `port_checks` (the
worker's and beat's metrics ports, as they record them), `report`.

Besides settings, Slack (token, scopes, SLACK_APP_TOKEN, each channel), Redis, the database, the LLM and the
embeddings endpoint, it lists the bots that posted lately in the watched channels (every channel relmon is in when
RELMON_WATCHED_CHANNELS is empty), with their bot, app and user IDs, marking those in RELMON_MONITORED_BOTS: the
way to find what to put in that setting.
"""
