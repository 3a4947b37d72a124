"""The values a setting of :mod:`bayes_loco.config` accepts (its :class:`Domain`), and the check of
one value against its default's type and its domain."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Domain:
    """The values a setting accepts: ``test`` of each number (each entry of a tuple), said as ``text``;
    a tuple's entries must also increase where ``increasing``."""

    text: str
    test: Callable[[float], bool]
    increasing: bool = False


POSITIVE = Domain("> 0", lambda v: v > 0)
NONNEGATIVE = Domain(">= 0", lambda v: v >= 0)
FRACTION = Domain("in (0, 1)", lambda v: 0 < v < 1)
SHARE = Domain("in [0, 1]", lambda v: 0 <= v <= 1)
BELOW_ONE = Domain("in [0, 1)", lambda v: 0 <= v < 1)
AT_LEAST_ONE = Domain(">= 1", lambda v: v >= 1)
BELOW_HALF = Domain("in (0, 0.5)", lambda v: 0 < v < 0.5)
POLYGON = Domain(">= 3", lambda v: v >= 3)
ZLIB_LEVEL = Domain("in 0 … 9", lambda v: 0 <= v <= 9)
INCREASING_FRACTIONS = Domain("in (0, 1)", FRACTION.test, increasing=True)
INCREASING_COUNTS = Domain(">= 0", NONNEGATIVE.test, increasing=True)


def check_value(name: str, value, default, domain: Domain):
    """``value`` for the setting ``name`` (a tuple where ``default`` is one), or ``TypeError`` where it
    is not of ``default``'s type and ``ValueError`` where it lies outside ``domain``, each naming it."""
    if isinstance(default, tuple):
        if not (isinstance(value, tuple | list) and len(value) == len(default)
                and all(_is_number(v) for v in value)):
            raise TypeError(f"{name} must be a tuple of {len(default)} numbers like its default "
                            f"{default}, got {value!r}")
        value = tuple(value)
    elif isinstance(default, int) and not (isinstance(value, int) and not isinstance(value, bool)):
        raise TypeError(f"{name} must be an int like its default {default}, got {value!r}")
    elif isinstance(default, float) and not _is_number(value):
        raise TypeError(f"{name} must be a real number like its default {default}, got {value!r}")
    entries = value if isinstance(value, tuple) else (value,)
    subject = f"{name}'s entries must each" if isinstance(value, tuple) else f"{name} must"
    if not all(domain.test(v) for v in entries):
        raise ValueError(f"{subject} be {domain.text}, got {value!r} (its default is {default})")
    if domain.increasing and any(b <= a for a, b in itertools.pairwise(entries)):
        raise ValueError(f"{name}'s entries must increase, got {value!r} (its default is {default})")
    return value


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
