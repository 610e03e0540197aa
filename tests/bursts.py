"""Concurrent bursts for tests and benches: call one function on many items from a pool of threads."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def burst(fn: Callable[[T], R], items: Iterable[T], *, workers: int = 8, together: bool = False) -> list[R]:
    """`fn(item)` for every item from `workers` threads; the results in the items' order. The first exception
    raised by a call is raised here (after every call has finished). together=True starts every call at the
    same moment (a barrier; one thread per item), as twin workers would."""
    items = list(items)
    if together:
        barrier = threading.Barrier(len(items))
        workers = len(items)
        call = fn

        def fn(item: T) -> R:
            barrier.wait(timeout=10)
            return call(item)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(fn, item) for item in items]
    return [future.result() for future in futures]
