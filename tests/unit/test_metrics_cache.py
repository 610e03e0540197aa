"""The state's single-flight cache (`common.metrics_cache`): read at most once per 15 s, by one scrape at a time,
for the threads of a process and, through a shared directory, for real forked processes (as gunicorn's)."""

from __future__ import annotations

import multiprocessing
import threading
import time
from pathlib import Path

import pytest

from common.metrics_cache import STATE_MAX_AGE_SECONDS, SingleFlightState, StateBusy


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class CountingRead:
    """A state read that takes `seconds` and counts itself; what it returns names the reading."""

    def __init__(self, seconds: float = 0.0) -> None:
        self.seconds = seconds
        self.count = 0
        self.lock = threading.Lock()

    def __call__(self) -> bytes:
        with self.lock:
            self.count += 1
            number = self.count
        time.sleep(self.seconds)
        return f"reading {number}\n".encode()


def test_fifteen_seconds_is_the_floor() -> None:
    assert STATE_MAX_AGE_SECONDS == 15.0


def test_concurrent_scrapes_wait_for_the_one_first_reading() -> None:
    read = CountingRead(seconds=0.3)
    state = SingleFlightState(read)
    bodies: list[bytes] = []
    threads = [threading.Thread(target=lambda: bodies.append(state.get())) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert read.count == 1
    assert bodies == [b"reading 1\n"] * 20


def test_a_reading_serves_for_15_s_then_one_scrape_reads_again() -> None:
    clock = Clock()
    read = CountingRead()
    state = SingleFlightState(read, clock=clock)
    assert state.get() == b"reading 1\n"
    clock.now += 14.9
    assert state.get() == b"reading 1\n"
    clock.now += 0.1
    assert state.get() == b"reading 2\n"
    assert read.count == 2
    clock.now -= 3600  # the wall clock stepped back: the reading's age is unknown, read again
    assert state.get() == b"reading 3\n"


def test_while_one_scrape_reads_again_the_others_get_the_previous_reading_at_once() -> None:
    clock = Clock()
    gate = threading.Event()
    count = 0

    def read() -> bytes:
        nonlocal count
        count += 1
        if count == 2:
            gate.wait(timeout=5)
        return f"reading {count}\n".encode()

    state = SingleFlightState(read, clock=clock)
    state.get()
    clock.now += STATE_MAX_AGE_SECONDS
    reader = threading.Thread(target=state.get)
    reader.start()
    time.sleep(0.1)  # the reader is inside read()
    started = time.monotonic()
    others = [state.get() for _ in range(10)]
    waited = time.monotonic() - started
    gate.set()
    reader.join(timeout=5)
    assert others == [b"reading 1\n"] * 10 and waited < 0.5
    assert state.get() == b"reading 2\n" and count == 2


def test_a_first_reading_that_does_not_come_is_a_busy_not_a_hang() -> None:
    gate = threading.Event()
    state = SingleFlightState(lambda: gate.wait(timeout=5) and b"late\n", wait_seconds=0.3)
    reader = threading.Thread(target=state.get)
    reader.start()
    time.sleep(0.05)
    started = time.monotonic()
    with pytest.raises(StateBusy):
        state.get()
    assert time.monotonic() - started < 1.5
    gate.set()
    reader.join(timeout=5)
    assert state.get() == b"late\n"


def _scrape_in_a_process(directory: str, log: str, scrapes: int, barrier) -> None:  # runs in a forked child
    def read() -> bytes:
        with open(log, "a") as file:  # O_APPEND: one whole line per reading, whichever process
            file.write("read\n")
        time.sleep(0.3)
        return b"the state\n"

    state = SingleFlightState(read, directory=Path(directory))
    barrier.wait(timeout=10)
    bodies = []
    threads = [threading.Thread(target=lambda: bodies.append(state.get())) for _ in range(scrapes)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=15)
    assert bodies == [b"the state\n"] * scrapes


def test_forked_processes_sharing_a_directory_read_once_between_them(tmp_path: Path) -> None:
    """As gunicorn's two processes: four real processes, five scraping threads each, one reading."""
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(4)
    log = tmp_path / "reads.log"
    processes = [
        context.Process(target=_scrape_in_a_process, args=(str(tmp_path), str(log), 5, barrier)) for _ in range(4)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=30)
    assert [process.exitcode for process in processes] == [0, 0, 0, 0]
    assert log.read_text() == "read\n"
    # And a process started later reuses that reading from the file while it is fresh.
    late = SingleFlightState(lambda: b"another reading\n", directory=tmp_path)
    assert late.get() == b"the state\n"


def test_a_torn_or_foreign_cache_file_is_read_again(tmp_path: Path) -> None:
    (tmp_path / "state.cache").write_bytes(b"not a reading\n")
    read = CountingRead()
    assert SingleFlightState(read, directory=tmp_path).get() == b"reading 1\n"
    (tmp_path / "state.cache").write_bytes(b"# relmon state read at nonsense\nx")
    assert SingleFlightState(read, directory=tmp_path).get() == b"reading 2\n"
