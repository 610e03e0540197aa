"""Task leases (workers.lease): how long a lease is, and which held messages a worker keeps renewing."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from store.settings import MIN_LEASE_SECONDS, Settings, largest_retry_delay
from workers.lease import leased_tags, renewal_interval


def test_the_visibility_timeout_is_a_short_lease_with_a_floor() -> None:
    assert Settings(_env_file=None).visibility_timeout_seconds == 30  # well under a minute: see workers.lease
    # A lease shorter than the judging retry delays is fine: held messages are renewed, not timed.
    assert largest_retry_delay(2.0, 6) > Settings(_env_file=None).visibility_timeout_seconds
    with pytest.raises(ValidationError, match="RELMON_VISIBILITY_TIMEOUT"):
        Settings(_env_file=None, RELMON_VISIBILITY_TIMEOUT=str(MIN_LEASE_SECONDS - 1))
    assert renewal_interval(30) == 5.0 and renewal_interval(MIN_LEASE_SECONDS) * 3 < MIN_LEASE_SECONDS


def test_after_a_reconnection_only_the_old_channels_running_tasks_keep_their_lease() -> None:
    held = ["running", "countdown", "prefetched"]
    assert leased_tags(held, current=True, running=set()) == held  # the consumer holds them all
    # Celery dropped the old channel's countdowns and prefetched messages: their leases lapse, they come back.
    assert leased_tags(held, current=False, running={"running", "elsewhere"}) == ["running"]
    assert leased_tags(held, current=False, running=set()) == []
