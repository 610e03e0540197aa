"""What a tracing tool's answer means to a send, the same for every tool (Langfuse, Phoenix): how long a send waits,
the statuses that refuse it for good, and `SendAgain` for an outage. A leaf, so that `workers.trace_sending` and the
tool-specific sends it calls (`workers.phoenix_annotations`) share it without importing each other."""

from __future__ import annotations

TIMEOUT_SECONDS = 10.0
REFUSED = (400, 401, 403, 404, 422)  # the tool says no: sending again would say the same


class SendAgain(Exception):
    """The tool was out of reach or failed (5xx, 429): worth another try later."""
