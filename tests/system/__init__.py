"""System tests: relmon's own processes (bot, worker, beat, the CLI) against real services and the fakes."""
