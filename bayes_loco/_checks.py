"""The checks every public fit makes of its data on entry: a :class:`DataWarning` when the labels
never vary or the rank exceeds what the data determine, said once per public call."""

from __future__ import annotations

import contextvars
import functools
import inspect
import numbers
import warnings

import numpy as np

from .data import PreferenceData
from .exceptions import DataWarning
from .linalg import span_dimension

# True while a public fit that has already checked its data runs: the fits it calls stay quiet.
_DATA_CHECKED = contextvars.ContextVar("bayes_loco_data_checked", default=False)


def check_data(data, name: str = "data") -> PreferenceData:
    """``data`` as a :class:`PreferenceData` for a fit; a :class:`DataWarning` when its labels never vary.

    Labels all of one class are a valid encoding for the contextual BTL model,
    which has no intercept: (Δφ, y = 1) and (−Δφ, y = 0) are the same observation,
    so "features_1 always holds the preferred answer" gives the same fit as any
    random ordering. They are also what a wrong label column looks like, so say it,
    once per public call (see :func:`checks_data`).
    """
    if not isinstance(data, PreferenceData):
        raise TypeError(f"{name} must be a PreferenceData, got {type(data).__name__}")
    varies = data.n <= 1 or data.winner_first or not np.all(data.labels == data.labels[0])
    if not _DATA_CHECKED.get() and not varies:
        if data.labels[0] == 0.5:
            warnings.warn(f"{name}.labels: all {data.n_comparisons} comparisons are ties (y = 0.5): they say "
                          "nothing about which answer is preferred. Check the label column (ties='davidson' "
                          "refuses such data).", DataWarning, stacklevel=3)
            return data
        y = int(data.labels[0])
        warnings.warn(
            f"{name}.labels: all {data.n_comparisons} comparisons have y = {y}. That is a valid encoding "
            f"when features_{y} always holds the preferred answer (the model has no intercept, so (Δφ, 1) "
            "and (−Δφ, 0) are the same observation); if the labels were meant to vary, check the label "
            "column.",
            DataWarning, stacklevel=3)
    return data


def warn_unidentified_rank(data: PreferenceData, rank, name: str = "rank") -> None:
    """A :class:`DataWarning` when ``rank`` (an int, or a sequence of candidates) exceeds
    :meth:`PreferenceData.identified_rank`; a value that is no valid rank is left to the fit's check."""
    ranks = np.ravel(rank if isinstance(rank, range | list | tuple | np.ndarray) else [rank])
    valid = {int(r) for r in ranks if isinstance(r, numbers.Integral) and 1 <= r <= min(data.d_x, data.d_phi)}
    if not valid:
        return
    top = max(valid)
    dims = spans_of(data, top)
    k = min(dims.values())
    if top <= k:
        return
    spans = " and ".join(f"the {what} span {dim}" for what, dim in dims.items() if dim == k)
    above = [str(r) for r in sorted(valid) if r > k]
    one = len(above) == 1
    which = ("" if name == "rank" else f"{name}: ") + ("rank " if one else "ranks ") + ", ".join(above)
    warnings.warn(
        f"{which} {'exceeds' if one else 'exceed'} the dimensions the data reach "
        f"({spans}): Θ is determined only on the spans of the contexts and of the differences, so at most "
        f"{k} components are fixed by the data and the rest by the prior, the penalty or the start alone. "
        f"Fit a rank of at most {k}.", DataWarning, stacklevel=3)


def checks_data(func):
    """Decorate a public function of ``data``: check it on entry, and keep the fits it calls quiet."""
    signature = inspect.signature(func)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        arguments = signature.bind_partial(*args, **kwargs).arguments
        data = check_data(arguments.get("data"))
        if not _DATA_CHECKED.get():
            for name in ("rank", "ranks"):
                warn_unidentified_rank(data, arguments.get(name), name)
        token = _DATA_CHECKED.set(True)
        try:
            return func(*args, **kwargs)
        finally:
            _DATA_CHECKED.reset(token)

    return wrapper


def spans_of(data: PreferenceData, at_most: int) -> dict[str, int]:
    """The dimensions of the spans of the contexts and of the differences, each capped at ``at_most``."""
    return {"contexts": span_dimension(data.contexts, at_most),
            "differences": span_dimension(data.distinct_differences(), at_most)}
