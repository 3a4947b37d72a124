"""The pointwise lower posterior quantile: a support-function-like bound that is not a set."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import as_float_array, check_option
from ..coordinates import Coordinates
from .base import check_features, check_set_coordinates, check_set_level


@dataclass(frozen=True, eq=False)
class QuantileSet:
    """Pointwise lower posterior quantile: ``lower_bound(z)`` = the (1 − level) quantile of θ_jᵀz.

    Not a set at all, strictly: each z gets its own worst case, so it guarantees
    P(θᵀz ≥ bound) ≈ level for each z separately and nothing jointly. It is not
    convex and has no ``solve_exact``, so only ``objective="relaxed"`` accepts it.
    A 90% pointwise bound is about c ≈ 1.28/√γ standard deviations
    (docs/design.md, pessimism point 4).

    Examples
    --------
    >>> draws = np.random.default_rng(0).normal(size=(1000, 2))
    >>> q = bl.QuantileSet(draws, bl.VecCoordinates(1, 2), level=0.9)
    >>> np.round(q.lower_bound(np.array([[1.0, 0.0]])), 2)   # the 10% quantile of a standard normal
    array([-1.29])
    """

    draws: np.ndarray
    coordinates: Coordinates
    level: float = 0.9
    kind: str = "quantile"

    def __post_init__(self):
        draws = as_float_array(self.draws, "draws", 2)
        if draws.shape[0] < 2:
            raise ValueError(f"draws must be a (J, k) array with J >= 2, got shape {draws.shape}")
        object.__setattr__(self, "draws", draws)
        check_set_coordinates(self.coordinates, draws.shape[1], "draws")
        check_set_level(self.level, allow_none=False)
        check_option(self.kind, "kind", ("quantile",))

    @property
    def dim(self) -> int:
        return self.draws.shape[1]

    def lower_bound(self, z: np.ndarray) -> np.ndarray:
        """The (1 − level) quantile of θ_jᵀz over the draws, for each z separately.

        Parameters
        ----------
        z : ndarray of shape (..., k)

        Returns
        -------
        ndarray of shape (...)

        Examples
        --------
        >>> q = bl.QuantileSet(np.random.default_rng(0).normal(size=(1000, 2)), bl.VecCoordinates(1, 2))
        >>> np.round(q.lower_bound(np.array([[1.0, 0.0], [0.0, 2.0]])), 2)
        array([-1.29, -2.53])
        """
        return np.quantile(check_features(z, self.dim) @ self.draws.T, 1.0 - self.level, axis=-1)

    def __repr__(self) -> str:
        return f"QuantileSet(draws={self.draws.shape[0]}, k={self.dim}, level={self.level:g})"
