"""What describes an ellipsoid: its kind, radius, level and scope, a symmetric W, and the χ² radius.

The checks :class:`~bayes_loco.sets.EllipsoidSet` runs on what it is given, apart from the set,
so that :mod:`.ellipsoid` holds the set's geometry.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from .._validation import check_finite, check_magnitude, check_memory, check_option
from ..data import SCOPES
from .base import ValueRadius, check_set_level

# What W and R mean (docs/design.md, "What each set's level means").
KINDS = ("gram", "wald", "credible", "sandwich")
# W must equal Wᵀ to this fraction of its largest entry; it is compared this many rows at a time.
SYMMETRY_RTOL = 1e-8
SYMMETRY_PANEL = 512


def chi_radius(level: float, dim: int) -> float:
    """√χ²_dim(level): the radius of a Gaussian ellipsoid of probability ``level`` in ``dim`` dimensions."""
    return float(np.sqrt(stats.chi2.ppf(level, dim)))


def check_description(radius, kind, level, sized_for, sizing) -> None:
    """The radius, kind, level, scope and sizing of an ellipsoid, or one error naming the wrong one."""
    radius = check_finite(radius, "radius")
    if radius < 0:
        raise ValueError(f"radius must be finite and >= 0, got {radius}")
    check_option(kind, "kind", KINDS)
    check_set_level(level, allow_none=True)
    if sized_for is not None:
        check_option(sized_for, "sized_for", SCOPES)
    if sizing is not None and not isinstance(sizing, ValueRadius):
        raise TypeError(f"sizing must be a ValueRadius or None, got {type(sizing).__name__}")


def check_symmetric(precision: np.ndarray) -> None:
    """Refuse a W that differs from Wᵀ by more than :data:`SYMMETRY_RTOL` of its largest entry.

    By panels of :data:`SYMMETRY_PANEL` rows against the matching columns: no k × k temporary.
    """
    k = precision.shape[0]
    top = max(float(precision.max()), -float(precision.min()), np.finfo(float).tiny)
    for lo in range(0, k, SYMMETRY_PANEL):
        hi = min(lo + SYMMETRY_PANEL, k)
        gap = np.abs(precision[lo:hi] - precision[:, lo:hi].T)
        if float(gap.max()) > SYMMETRY_RTOL * top:
            i, j = np.unravel_index(int(gap.argmax()), gap.shape)
            i = lo + int(i)
            raise ValueError(f"precision (W) must be symmetric: W[{i}, {j}] = {precision[i, j]:.6g} but "
                             f"W[{j}, {i}] = {precision[j, i]:.6g}; pass (W + W.T) / 2 if the difference is "
                             "rounding")


def check_factored(precision, k: int, radius, fields: dict) -> None:
    """What :meth:`~bayes_loco.sets.EllipsoidSet.factored` needs before it overwrites ``precision``.

    A float64 k × k symmetric W of finite size, the set's description, and the memory for the factor.
    """
    if not isinstance(precision, np.ndarray) or precision.dtype != np.float64:
        raise TypeError(f"precision (W) must be a ({k}, {k}) float64 array, got "
                        f"{getattr(precision, 'dtype', type(precision).__name__)}")
    if precision.shape != (k, k):
        raise ValueError(f"precision (W) must have shape ({k}, {k}) to match center, got "
                         f"{precision.shape}")
    check_description(radius, fields.get("kind", "gram"), fields.get("level"), fields.get("sized_for"),
                      fields.get("sizing"))
    check_magnitude(precision, "precision (W)")
    check_symmetric(precision)
    check_memory(8.0 * k**2, f"the Cholesky factor of the {k} x {k} W, beside W",
                 "use fewer coordinates (a lower rank)")
