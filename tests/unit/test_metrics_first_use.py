"""A process's Prometheus counters are created once even when its first requests come together (gunicorn's
threads): a second creation registers the same series again and raises, a 500 to Slack."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_threads_acknowledging_together_create_the_counters_once(tmp_path) -> None:
    script = textwrap.dedent(
        """
        import os, sys, threading
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = sys.argv[1]
        from common import metrics

        start, failures = threading.Barrier(16), []

        def ack():
            start.wait()
            try:
                metrics.event_acked("http", 200, 0.001)
            except Exception as error:
                failures.append(repr(error))

        threads = [threading.Thread(target=ack) for _ in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print(failures)
        """
    )
    for _ in range(5):  # the race is narrow: a few fresh processes
        done = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=60, check=True
        )
        assert done.stdout.strip() == "[]", done.stdout + done.stderr
