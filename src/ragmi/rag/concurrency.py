"""Answering a batch of requests a few at a time, stopping at the first failure: shared by remote
targets (``ragmi.rag.remote``) and python targets (``ragmi.rag.python_target``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed


class Cancelled(Exception):
    """A queued request not sent (or call not made) because another one of its batch failed."""


def answer_concurrently(
    requests: list, call: Callable, n: int, stop: threading.Event, log: Callable, on_result: Callable | None = None
) -> list:
    """``call(request)`` for every request, ``n`` at a time; ``on_result(i, answer)`` as each arrives.
    On the first failure ``stop`` is set (``call`` then raises :class:`Cancelled` for what is still
    queued), the answers of the calls in flight are still reported (and so cached), then the failure
    is raised.  Shared by remote targets and python targets (``ragmi.rag.python_target``)."""
    results: list = [None] * len(requests)
    failure = None
    done = 0
    with ThreadPoolExecutor(max_workers=n) as pool:
        futures = {pool.submit(call, r): i for i, r in enumerate(requests)}
        for fut in as_completed(futures):
            i = futures[fut]
            try:
                res = fut.result()
            except Cancelled:
                continue
            except BaseException as e:  # noqa: BLE001 - stop sending, keep what arrived, re-raise
                if failure is None:
                    failure = e
                    stop.set()
                continue
            results[i] = res
            if on_result is not None:
                on_result(i, res)
            done += 1
            if done % max(1, len(requests) // 10) == 0 or done == len(requests):
                log(f"  answered {done}/{len(requests)}")
    if failure is not None:
        log(f"  {done} answers obtained before the failure (kept in the response cache)")
        raise failure
    return results
