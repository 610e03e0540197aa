"""The one place channels' names come from (`common.channel_names` over `store.channel_names`), on SQLite and
PostgreSQL and the fake Slack: the stored name first, then conversations.info (stored for next time), the newest
name winning; a channel nobody names stays unnamed, and an unreachable Slack is not asked again and again."""

from __future__ import annotations

from slack_sdk import WebClient

from common.channel_names import channel_names
from store import channel_names as stored
from store.db import Database
from tests.fakes.slack_server import FakeSlack


def test_the_newest_name_wins_and_only_the_channels_asked_for_are_read(database: Database) -> None:
    with database.session() as session:
        stored.remember(session, {"C1": "support", "C2": "#billing", "D1": ""}, stored.EXPORT)
    with database.session() as session:
        stored.remember(session, {"C1": "help-desk"}, stored.SLACK)  # renamed in Slack since the export
    with database.reading() as session:
        assert stored.known(session) == {"C1": "help-desk", "C2": "billing"}  # no `#`; a blank name is no name
        assert stored.known(session, ["C2", "C9"]) == {"C2": "billing"}
        assert stored.known(session, []) == {}


def test_slack_names_what_is_not_stored_and_the_name_is_kept(database: Database, slack: FakeSlack) -> None:
    slack.add_channel("C0SUPPORT1", "support")
    client = WebClient(token="xoxb-test", base_url=slack.api_url)
    with database.session() as session:
        stored.remember(session, {"C0BILLING2": "billing"}, stored.EXPORT)
    names = channel_names(database, ["C0SUPPORT1", "C0BILLING2", "C0GONE0003", None], client)
    assert names == {"C0SUPPORT1": "support", "C0BILLING2": "billing"}  # C0GONE0003: Slack does not know it
    assert [call["channel"] for call in slack.calls_to("conversations.info")] == ["C0GONE0003", "C0SUPPORT1"]
    # Known now without Slack, and not asked for again.
    assert channel_names(database, ["C0SUPPORT1"], None) == {"C0SUPPORT1": "support"}
    channel_names(database, ["C0SUPPORT1"], client)
    assert len(slack.calls_to("conversations.info")) == 2


class CountingClient(WebClient):
    """A real client that counts its conversations.info calls."""

    asked = 0

    def conversations_info(self, **kwargs):
        self.asked += 1
        return super().conversations_info(**kwargs)


def test_an_unreachable_slack_is_asked_once_and_the_ids_are_shown(database: Database) -> None:
    client = CountingClient(token="xoxb-test", base_url="http://127.0.0.1:9/", timeout=2)  # nothing listens there
    assert channel_names(database, ["C1", "C2", "C3"], client) == {}
    assert client.asked == 1
