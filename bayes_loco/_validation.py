"""Argument checks shared by every public entry point.

Each check raises one ``ValueError``/``TypeError`` that names the argument and
what was wrong with it, in the style of scikit-learn's ``check_array``.
"""

from __future__ import annotations

import numbers

import numpy as np


def as_float_array(value, name: str, ndim: int) -> np.ndarray:
    """Return ``value`` as a finite float64 array with ``ndim`` dimensions."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be numeric, got {type(value).__name__}") from exc
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape})")
    bad = ~np.isfinite(arr)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        where = idx[0] if len(idx) == 1 else idx
        raise ValueError(f"{name} contains NaN or infinity, first at {name}[{where}]")
    return arr


def check_int(value, name: str, low: int, high: int | None = None) -> int:
    """Return ``value`` as an int in ``[low, high]`` or raise naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be {bound}, got {value}")
    return value


def check_real(value, name: str, low: float = -np.inf, high: float = np.inf,
               low_open: bool = False, high_open: bool = False) -> float:
    """Return ``value`` as a finite float in the given interval or raise naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    below = value <= low if low_open else value < low
    above = value >= high if high_open else value > high
    if not np.isfinite(value) or below or above:
        lo = "(" if low_open else "["
        hi = ")" if high_open else "]"
        raise ValueError(f"{name} must be in {lo}{low}, {high}{hi}, got {value}")
    return value


def check_option(value, name: str, options: tuple[str, ...]) -> str:
    """Return ``value`` if it is one of ``options`` or raise naming ``name``."""
    if value not in options:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, options))}; got {value!r}")
    return value


def check_rank(rank, d_x: int, d_phi: int) -> int:
    """Rank r of Θ must satisfy 1 <= r <= min(d_x, d_φ)."""
    return check_int(rank, "rank", 1, min(d_x, d_phi))


def rng_from(seed) -> np.random.Generator:
    """A NumPy generator from an int seed, a SeedSequence or an existing generator."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None:
        raise ValueError("seed must be given (an int, SeedSequence or Generator) so results reproduce")
    return np.random.default_rng(seed)


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation (Linux's MemAvailable), or None where unknown."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_memory(nbytes: float, what: str, advice: str) -> None:
    """Raise one ``MemoryError`` naming ``what``, its size and the memory available, before allocating.

    A step that would exhaust memory is refused here instead of being killed by the
    system part-way (or swapping for hours); ``advice`` says what to do instead.
    """
    free = available_memory()
    if free is not None and nbytes > free:
        raise MemoryError(f"{what} needs {nbytes / 1024**3:.1f} GiB and {free / 1024**3:.1f} GiB of memory "
                          f"is available; {advice}")
