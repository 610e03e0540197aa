"""Block Kit rendering of what relmon posts: pure functions from plain data to `{"text", "blocks"}`."""
