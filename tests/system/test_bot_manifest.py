"""The shipped manifest parses and asks for exactly what relmon uses."""

from __future__ import annotations

import subprocess
import sys

import yaml

from bot.manifest import manifest, manifest_yaml


def test_manifest_asks_only_for_the_bot_scopes_relmon_uses() -> None:
    scopes = manifest()["oauth_config"]["scopes"]
    assert sorted(scopes["bot"]) == sorted(
        [
            "channels:history",
            "groups:history",
            "channels:read",
            "groups:read",
            "chat:write",
            "commands",
            "users:read",
            "files:write",
            "reactions:read",
            "usergroups:read",  # RELMON_SUPPORT_TEAM may name a user group (usergroups.users.list)
        ]
    )
    assert scopes.keys() == {"bot"}  # no user scopes


def test_manifest_subscribes_to_the_events_relmon_handles() -> None:
    assert manifest()["settings"]["event_subscriptions"]["bot_events"] == [
        "message.channels",
        "message.groups",
        "app_home_opened",
        "reaction_added",
        "reaction_removed",
        "member_joined_channel",  # the membership cache follows joins and leaves (common.membership)
        "member_left_channel",
    ]


def test_manifest_sends_slacks_requests_to_slack_events_over_http() -> None:
    settings = manifest()["settings"]
    assert settings["event_subscriptions"]["request_url"].endswith("/slack/events")
    assert settings["interactivity"] == {"is_enabled": True, "request_url": "https://YOUR-HOST/slack/events"}
    assert settings["socket_mode_enabled"] is False


def test_manifest_enables_the_home_tab() -> None:
    assert manifest()["features"]["app_home"]["home_tab_enabled"] is True


def test_manifest_names_the_bot_user_relmon() -> None:
    assert manifest()["features"]["bot_user"]["display_name"] == "relmon"


def test_manifest_declares_the_judge_command_alone() -> None:
    [command] = manifest()["features"]["slash_commands"]
    assert command["command"] == "/judge" and command["usage_hint"]


def test_manifest_declares_the_judge_this_answer_shortcut_alone() -> None:
    [shortcut] = manifest()["features"]["shortcuts"]
    assert (shortcut["type"], shortcut["callback_id"], shortcut["name"]) == (
        "message",
        "judge_this_answer",
        "Judge this answer",
    )


def test_relmon_manifest_prints_it() -> None:
    printed = subprocess.run(
        [sys.executable, "-c", "import sys; from relmon.cli import main; sys.exit(main(['manifest']))"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert printed == manifest_yaml()
    assert yaml.safe_load(printed)["display_information"]["name"] == "relmon"


def test_every_scope_and_event_is_explained_in_the_docs() -> None:
    """docs/slack-app.md, linked from the README's set-up, says why for each scope and lists each event."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "slack-app.md").read_text()
    made = manifest()
    wanted = made["oauth_config"]["scopes"]["bot"] + made["settings"]["event_subscriptions"]["bot_events"]
    assert [name for name in wanted if f"`{name}`" not in text] == []
