"""The bad-input catalogue's one check: a call either fails in bayes_loco's own words or warns and is right.

No bad input may end in someone else's traceback. :func:`refused`
runs a call that must fail and checks three things a user would see: the
exception is one of the expected types, its message matches (names the argument
and what was wrong), and the frame that raised it lies inside the ``bayes_loco``
package, not in NumPy, pandas, h5py or PyMC. :func:`warned` runs a call that must
succeed with a warning of bayes_loco's and returns its result for the caller to
check.

Every catalogue test file tags its cases with the ``catalogue`` marker so that
``pytest -m catalogue --collect-only -q`` counts them.
"""

from __future__ import annotations

import traceback
import warnings
from pathlib import Path

import pytest

import bayes_loco

PACKAGE_DIR = Path(bayes_loco.__file__).resolve().parent


def raising_frame(exc: BaseException) -> str:
    """The file of the innermost frame of ``exc``'s traceback (where it was raised)."""
    frames = traceback.extract_tb(exc.__traceback__)
    return frames[-1].filename if frames else "<no frame>"


def refused(call, match: str, exc: type[BaseException] | tuple[type[BaseException], ...] = (ValueError,
                                                                                            TypeError)):
    """Assert that ``call()`` raises ``exc`` with a message matching ``match``, raised inside bayes_loco.

    Returns the exception so a case can check more of it (e.g. that it names a path).
    """
    with pytest.raises(exc, match=match) as info:
        call()
    origin = Path(raising_frame(info.value)).resolve()
    assert PACKAGE_DIR in origin.parents, (
        f"{type(info.value).__name__} raised outside bayes_loco, in {origin}: {info.value}")
    return info.value


def warned(call, match: str, category: type[Warning] = bayes_loco.BayesLocoWarning):
    """Assert that ``call()`` warns with ``category`` matching ``match``; return its result."""
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        with pytest.warns(category, match=match):
            return call()
