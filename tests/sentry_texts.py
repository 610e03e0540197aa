"""What must never reach Sentry: the texts, tokens and URLs the Sentry tests plant in errors, and SECRETS, every
piece of them to look for in what Sentry received."""

from __future__ import annotations

QUESTION = "Why was I charged twice for order 99812 on my Visa?"
ANSWER = "Refunds for duplicate charges on order 99812 take five days."
BOT_TOKEN = "xoxb-5555-6666-SeNtRyLeAkTeSt"
OPENAI_KEY = "sk-proj-NeverSendThisKey12345"
# A response_url is a credential to post; a URL's query can carry cursors, keys or texts.
RESPONSE_URL = "https://hooks.slack.com/commands/T0001/12345/RespUrlSecretPath"
LLM_URL = "http://127.0.0.1:9/v1/chat/completions?api-version=2024&cursor=QueryStringSecret"
SECRETS = (
    QUESTION, ANSWER, BOT_TOKEN, OPENAI_KEY, "99812", "SeNtRy", "NeverSendThisKey", "RespUrlSecretPath",
    "QueryStringSecret",
)  # fmt: skip
