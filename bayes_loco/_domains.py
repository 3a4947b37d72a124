"""The values a setting of :mod:`bayes_loco.config` accepts (its :class:`Domain`), the check of
one value against its default's type and its domain, and the two number tests every check shares
(:func:`is_integer`, :func:`is_real`: NumPy's scalars count, ``True`` does not)."""

from __future__ import annotations

import itertools
import numbers
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


def is_integer(value) -> bool:
    """Whether ``value`` is an integer (Python's or NumPy's), a bool excepted."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value) -> bool:
    """Whether ``value`` is a real number (Python's or NumPy's, integers too), a bool excepted."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_value(name: str, value, default, domain: Domain):
    """``value`` for the setting ``name`` as ``default``'s type (a tuple of its entries' types where
    ``default`` is one), or ``TypeError`` where it is not of that type and ``ValueError`` where it
    lies outside ``domain``, each naming it."""
    if isinstance(default, tuple):
        if not (isinstance(value, tuple | list) and len(value) == len(default)
                and all(_is_like(v, d) for v, d in zip(value, default, strict=True))):
            kind = "integers" if all(is_integer(d) for d in default) else "numbers"
            raise TypeError(f"{name} must be a tuple of {len(default)} {kind} like its default "
                            f"{default}, got {value!r}")
        value = tuple(type(d)(v) for v, d in zip(value, default, strict=True))
    elif not _is_like(value, default):
        kind = "an int" if is_integer(default) else "a real number"
        raise TypeError(f"{name} must be {kind} like its default {default}, got {value!r}")
    else:
        value = type(default)(value)
    entries = value if isinstance(value, tuple) else (value,)
    subject = f"{name}'s entries must each" if isinstance(value, tuple) else f"{name} must"
    if not all(domain.test(v) for v in entries):
        raise ValueError(f"{subject} be {domain.text}, got {value!r} (its default is {default})")
    if domain.increasing and any(b <= a for a, b in itertools.pairwise(entries)):
        raise ValueError(f"{name}'s entries must increase, got {value!r} (its default is {default})")
    return value


def _is_like(value, default) -> bool:
    """Whether ``value`` may stand for ``default``: an integer for an int, any real for a float."""
    return is_integer(value) if is_integer(default) else is_real(value)
