"""The fake Slack's workspace, shared by its parts (tests/fakes/slack_server.py and the modules it is built from):
the team, relmon's own user, bot and app ids, and a channel."""

from __future__ import annotations

from dataclasses import dataclass, field

TEAM_ID = "T_TEST"
RELMON_USER_ID = "U_RELMON"
RELMON_BOT_ID = "B_RELMON"
RELMON_APP_ID = "A_RELMON"


@dataclass
class Channel:
    id: str
    name: str
    is_private: bool = False
    members: list[str] = field(default_factory=list)
    is_ext_shared: bool = False
    is_org_shared: bool = False  # shared across an Enterprise Grid organisation's workspaces
