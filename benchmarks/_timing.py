"""Best-of-n wall-clock timing shared by the benchmark scripts."""

import time


def best_of(fn, repeat: int = 3) -> tuple[float, object]:
    """Smallest wall time of ``repeat`` calls and the last result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out
