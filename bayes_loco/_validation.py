"""Argument checks shared by every public entry point.

Each check raises one ``ValueError``/``TypeError`` that names the argument and
what was wrong with it, in the style of scikit-learn's ``check_array``.
"""

from __future__ import annotations

import hashlib
import numbers

import numpy as np

from ._domains import is_integer, is_real
from .config import get_config


def _position(index) -> object:
    idx = tuple(int(i) for i in index)
    return idx[0] if len(idx) == 1 else idx


def _check_dtype(raw: np.ndarray, name: str, what: str = "numeric") -> None:
    """Refuse the dtypes NumPy would convert to float silently or with a warning, naming ``name``."""
    kind = raw.dtype.kind
    if kind == "c":
        raise TypeError(f"{name} must be {what} and real, got complex ({raw.dtype}); pass its real part "
                        f"({name}.real) if the imaginary parts are 0")
    if kind in "mM":
        raise TypeError(f"{name} must be {what}, got {raw.dtype} dates or durations; convert them to numbers "
                        "first (e.g. days since a reference date)")
    if kind in "USV":
        raise TypeError(f"{name} must be {what}, got strings ({raw.dtype}); convert them first, e.g. "
                        f"{name}.astype(float)")
    if kind == "O":
        for index, item in np.ndenumerate(raw):
            if item is None or isinstance(item, str | bytes) or not isinstance(item, numbers.Real):
                raise TypeError(f"{name} must be {what}, but {name}[{_position(index)}] is {item!r} "
                                f"({type(item).__name__}); drop or impute missing values, convert strings")


def check_magnitude(arr: np.ndarray, name: str) -> None:
    """Refuse NaN, infinity and entries above ``config["max_abs"]`` in magnitude, naming ``name``.

    A block of leading rows at a time, by their minimum and maximum: no temporary of the
    array's size (a k × k W is 2.2 GB at LLM width).
    """
    rows = max(1, get_config()["check_block"] // max(1, arr[:1].size))
    for lo in range(0, arr.shape[0] if arr.ndim else 1, rows):
        block = arr[lo: lo + rows] if arr.ndim else arr
        if not block.size:
            continue
        low, high = float(block.min()), float(block.max())
        if np.isfinite(low) and np.isfinite(high) and max(-low, high) <= get_config()["max_abs"]:
            continue
        bad = ~np.isfinite(block)
        if bad.any():
            first = np.argwhere(bad)[0]
            where = _position((lo + first[0], *first[1:]) if arr.ndim else ())
            raise ValueError(f"{name} contains NaN or infinity, first at {name}[{where}]")
        index = np.unravel_index(int(np.argmax(np.abs(block))), block.shape)
        where = _position((lo + index[0], *index[1:]) if arr.ndim else ())
        raise ValueError(f"{name} has an entry of magnitude {float(np.abs(block[index])):.3g} at "
                         f"{name}[{where}], above {get_config()["max_abs"]:g}: products of such values "
                         f"overflow. "
                         f"Rescale {name} (e.g. standardise its columns)")


def as_float_array(value, name: str, ndim: int | None) -> np.ndarray:
    """Return ``value`` as a finite float64 ``ndim``-dimensional array with entries at most
    ``config["max_abs"]``.

    ``ndim`` None accepts any number of dimensions.

    Complex, date, string and object (None, strings) inputs are refused rather than
    converted: NumPy would drop imaginary parts, read dates as numbers or parse strings.
    """
    if not isinstance(value, np.ndarray) or value.dtype != np.float64:
        try:
            raw = np.asarray(value)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name} must be a numeric array, got {type(value).__name__}: {exc}") from exc
        _check_dtype(raw, name)
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be numeric, got {type(value).__name__}") from exc
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape})")
    check_magnitude(arr, name)
    return arr


def as_labels(value, name: str = "labels") -> np.ndarray:
    """Return ``value`` as a 1-d array of labels in {0, ½, 1} (bool accepted), or one error naming ``name``.

    ½ is a tie. Labels without a tie come back as int8 (the encoding of files written before
    ties existed); labels with one as float64. Strings such as ``'0'``/``'1'`` or
    ``'yes'``/``'no'`` and missing values are refused with the conversion to make, never parsed.
    """
    raw = np.asarray(value)
    strings = [v for v in raw.flat if isinstance(v, str | bytes)] if raw.dtype.kind in "OUSV" else []
    if strings:
        first = str(strings[0]) if isinstance(strings[0], str) else bytes(strings[0])
        raise TypeError(f"{name} must be 0/1 numbers, got strings (e.g. {first!r}); convert them first, e.g. "
                        f"{name}.astype(int) for '0'/'1' or ({name} == 'yes').astype(int) for 'yes'/'no' "
                        "(PreferenceData.from_frame maps tie strings such as 'tie' to 0.5)")
    _check_dtype(raw, name, "0/1 numbers")
    if raw.ndim != 1:
        raise ValueError(f"{name} must be 1-dimensional, got shape {raw.shape}")
    arr = raw.astype(np.float64) if raw.dtype.kind == "O" else raw
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        i = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ValueError(f"{name}[{i}] is {arr[i]}; labels must be 0, 0.5 (a tie) or 1 "
                         "(drop or impute missing labels)")
    bad = ~np.isin(arr, (0, 0.5, 1))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name}[{i}] = {arr[i].item()!r}, expected 0, 0.5 (a tie) or 1")
    if np.isin(arr, (0, 1)).all():
        return arr.astype(np.int8)
    return arr.astype(np.float64)


def as_weights(value, n: int, name: str = "weights") -> np.ndarray:
    """Return ``value`` as a read-only 1-d float64 array of ``n`` positive finite weights, or one error."""
    arr = as_float_array(value, name, 1)
    if arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} entries, expected one per comparison ({n})")
    bad = ~(arr > 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name}[{i}] = {arr[i].item()!r}; weights must be positive "
                         "(drop comparisons of weight 0)")
    arr = arr.copy()
    arr.setflags(write=False)
    return arr


def fingerprint(*arrays: np.ndarray) -> str:
    """A short hash of the arrays' shapes, dtypes and contents: which data or population an object came from.

    Arrays above ``config["fingerprint_bytes"]`` are hashed through an evenly spaced sample of
    their rows of about that size, so the cost stays bounded; two populations drawn
    apart differ in every row, so a sample tells them apart.
    """
    digest = hashlib.blake2b(digest_size=16)
    for arr in arrays:
        arr = np.asarray(arr)
        digest.update(f"{arr.dtype.str}{arr.shape}".encode())
        if arr.nbytes <= get_config()["fingerprint_bytes"]:
            digest.update(np.ascontiguousarray(arr).tobytes())
        else:
            # Every step-th leading row, a view: a non-contiguous array is not copied whole, and the bytes
            # hashed do not depend on the memory layout (a sum's rounding would).
            rows = max(1, get_config()["fingerprint_bytes"] // max(1, arr[:1].nbytes))
            digest.update(np.ascontiguousarray(arr[:: -(-arr.shape[0] // rows)]).tobytes())
    return digest.hexdigest()


def check_finite(value, name: str, allow_nan: bool = False) -> float:
    """Return ``value`` as a finite float (NaN too with ``allow_nan``), or one error naming ``name``."""
    if not is_real(value):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    if not (np.isfinite(value) or (allow_nan and np.isnan(value))):
        raise ValueError(f"{name} must be finite, got {value}")
    return float(value)


def check_instance(value, name: str, cls: type | tuple[type, ...], what: str | None = None):
    """Return ``value`` if it is a ``cls``, or raise one ``TypeError`` naming ``name`` and what it must be."""
    if not isinstance(value, cls):
        what = what or (cls.__name__ if isinstance(cls, type) else " or ".join(c.__name__ for c in cls))
        raise TypeError(f"{name} must be a {what}, got {type(value).__name__}")
    return value


def check_shape(arr: np.ndarray, name: str, shape: tuple[int, ...], why: str = "") -> np.ndarray:
    """Return ``arr`` if it has ``shape`` or raise one ``ValueError`` naming ``name`` (and ``why``)."""
    if arr.shape != shape:
        raise ValueError(f"{name} must have shape {shape}{why}, got {arr.shape}")
    return arr


def check_int(value, name: str, low: int, high: int | None = None) -> int:
    """Return ``value`` as an int in ``[low, high]`` or raise naming ``name``."""
    if not is_integer(value):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be {bound}, got {value}")
    return value


def check_real(value, name: str, low: float = -np.inf, high: float = np.inf,
               low_open: bool = False, high_open: bool = False) -> float:
    """Return ``value`` as a finite float in the given interval or raise naming ``name``."""
    if not is_real(value):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    value = float(value)
    below = value <= low if low_open else value < low
    above = value >= high if high_open else value > high
    if not np.isfinite(value) or below or above:
        lo = "(" if low_open else "["
        hi = ")" if high_open else "]"
        raise ValueError(f"{name} must be in {lo}{low}, {high}{hi}, got {value}")
    return value


#: The one default nominal level of every set, interval, summary and decision (the paper's 90 %).
LEVEL = 0.9


def check_level(level, name: str = "level", *, allow_none: bool = False) -> float | None:
    """A nominal level in (0, 1) as a float (None allowed with ``allow_none``), or one error.

    The one check of every ``level`` argument: sets, predictions, summaries and decisions
    read a level the same way, so 0 and 1 are refused everywhere (a set of level 1 is the
    whole space, one of level 0 is empty).

    >>> from bayes_loco._validation import check_level
    >>> check_level(0.9)
    0.9
    >>> check_level(1.0)
    Traceback (most recent call last):
    ...
    ValueError: level must be in (0, 1), got 1.0
    """
    if level is None and allow_none:
        return None
    value = check_finite(level, name)
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name} must be in (0, 1){' or None' if allow_none else ''}, got {value}")
    return value


def check_option(value, name: str, options: tuple[str, ...]) -> str:
    """Return ``value`` if it is one of ``options`` or raise naming ``name``."""
    if value not in options:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, options))}; got {value!r}")
    return value


def check_rank(rank, d_x: int, d_phi: int) -> int:
    """Rank r of Θ must satisfy 1 <= r <= min(d_x, d_φ)."""
    return check_int(rank, "rank", 1, min(d_x, d_phi))


def rng_from(seed, name: str = "seed") -> np.random.Generator:
    """A NumPy generator from a non-negative int seed, a SeedSequence or an existing generator."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None:
        raise ValueError(f"{name} must be given (an int, SeedSequence or Generator) so results reproduce")
    if isinstance(seed, np.random.SeedSequence | np.random.BitGenerator):
        return np.random.default_rng(seed)
    if not is_integer(seed):
        raise TypeError(f"{name} must be a non-negative int, a SeedSequence or a Generator, got {seed!r}")
    if seed < 0:
        raise ValueError(f"{name} must be a non-negative int, got {seed}")
    return np.random.default_rng(int(seed))


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


def as_counts(value, n: int, name: str = "counts") -> np.ndarray:
    """Return ``value`` as a read-only 1-d float64 array of ``n`` counts (whole numbers ≥ 0, not all 0),
    or one error naming ``name`` and the first bad entry."""
    arr = as_float_array(value, name, 1)
    if arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} entries, expected one per comparison ({n})")
    bad = (arr < 0) | (arr != np.round(arr))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name}[{i}] = {arr[i].item()!r}; counts (frequency weights) must be whole numbers "
                         ">= 0. Weights that are not counts are sampling weights: pass them as weights")
    if not arr.any():
        raise ValueError(f"{name} are all 0: no comparison is left")
    arr = arr.copy()
    arr.setflags(write=False)
    return arr


def as_names(value, name: str, size: int | None = None) -> tuple[str, ...]:
    """Return ``value`` as a tuple of ``size`` distinct, non-empty strings, or one error naming ``name``."""
    if isinstance(value, str) or not hasattr(value, "__iter__"):
        raise TypeError(f"{name} must be a sequence of str, got {type(value).__name__}")
    names = tuple(value)
    odd = [v for v in names if not isinstance(v, str) or not v.strip()]
    if odd:
        raise TypeError(f"{name} must hold non-empty strings, got {odd[0]!r}")
    if size is not None and len(names) != size:
        raise ValueError(f"{name} has {len(names)} names, expected {size}")
    seen, clashes = set(), []
    for v in names:
        if v in seen:
            clashes.append(v)
        seen.add(v)
    if clashes:
        raise ValueError(f"{name} names {clashes[0]!r} more than once: names must tell the columns apart")
    return names
