"""`member_joined_channel` and `member_left_channel`: the channel's cached members are dropped in every process
(`common.membership.MembershipCache.forget`), so a person removed from a channel loses `/judge`, the shortcut,
`/judge stats` and the App Home figures of it at once."""

from __future__ import annotations

from slack_bolt import App

from bot.deps import BotDeps


def register(app: App, deps: BotDeps) -> None:
    membership = deps.membership

    def on_membership_change(event: dict) -> None:
        membership.forget(event["channel"])  # the request guard checked it is a non-empty string

    app.event("member_joined_channel")(on_membership_change)
    app.event("member_left_channel")(on_membership_change)
