"""The judges' names, their one home: a leaf module that loads nothing (not the OpenAI SDK), so the bot, the CLI's
choices and the channel rules read them without loading the judges library."""

from __future__ import annotations

RELEVANCY = "relevancy"
CORRECTNESS = "correctness"
GROUNDED = "grounded"
JUDGE_NAMES = (RELEVANCY, CORRECTNESS, GROUNDED)
