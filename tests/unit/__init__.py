"""Unit tests: pure functions over plain data (pairing, policy, statistics, rendering, parsing). No services."""
