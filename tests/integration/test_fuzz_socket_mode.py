"""Hostile input over Socket Mode: seeded mutations of valid events, slash commands and block actions handed to
the bot's guarded Socket Mode handler (no websocket). Socket Mode skips HTTP, not the shape checks: every payload
is acknowledged, a malformed one is never dispatched to Bolt, a valid one is."""

from __future__ import annotations

import logging
import random
import types

import pytest
from slack_bolt import BoltResponse

from tests import slack_interactions as si
from tests.request_mutations import MUTATION_SEED, mutate, valid_requests

SOCKET_KINDS = {"events": "events_api", "commands": "slash_commands", "block_actions": "interactive"}


@pytest.mark.parametrize("kind", sorted(SOCKET_KINDS))
def test_socket_mode_payloads_of_odd_shapes_are_acknowledged_never_dispatched(kind: str) -> None:
    """Socket Mode skips HTTP, not the shape checks: a malformed payload is acknowledged (no redelivery) and never
    reaches Bolt; a valid one does."""
    from slack_sdk.socket_mode.request import SocketModeRequest

    from bot.socket_mode import GuardedSocketModeHandler

    class Client:
        logger = logging.getLogger("fuzz.socket_mode")

        def __init__(self) -> None:
            self.acks: list[str] = []

        def send_socket_mode_response(self, response) -> None:
            self.acks.append(response.envelope_id)

    dispatched: list[dict] = []
    handler = GuardedSocketModeHandler.__new__(GuardedSocketModeHandler)  # no websocket: only `handle` is tried
    ok = BoltResponse(status=200)
    handler.app = types.SimpleNamespace(dispatch=lambda request: dispatched.append(request.body) or ok)
    client, rng = Client(), random.Random(f"{MUTATION_SEED}-socket-{kind}")
    refused = 0
    for number in range(200):
        payload = mutate(rng, rng.choice(valid_requests(kind)))
        before = len(dispatched)
        handler.handle(client, SocketModeRequest(type=SOCKET_KINDS[kind], envelope_id=f"e{number}", payload=payload))
        assert client.acks[-1] == f"e{number}"  # acknowledged either way
        refused += len(dispatched) == before
    assert 0 < refused < 200
    for payload in valid_requests(kind):
        handler.handle(client, SocketModeRequest(type=SOCKET_KINDS[kind], envelope_id="ok", payload=payload))
        assert dispatched[-1] is payload
    broken = si.block_actions_payload("relmon_right", "1")
    del broken["actions"][0]["action_id"]
    if kind == "block_actions":
        handler.handle(client, SocketModeRequest(type="interactive", envelope_id="no-id", payload=broken))
        assert dispatched[-1] is not broken and client.acks[-1] == "no-id"
