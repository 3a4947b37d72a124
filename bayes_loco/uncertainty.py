"""Uncertainty sets for the parameter, the one thing the pessimistic solver needs.

A set lives in some coordinates of Θ (vec(Θ) for the MLE baselines, θ_rtv for
PRS and the posterior) and exposes its support function from below,
``lower_bound(z) = min_{θ ∈ set} θᵀ z``, for a batch of feature vectors z.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Protocol, runtime_checkable

import numpy as np
from scipy import stats

# Eigenvalues of W below this fraction of the largest are treated as zero: those
# directions are not reached by any comparison (DESIGN.md, convention 1).
RANGE_RTOL = 1e-10
# A feature vector with a relative component this large outside range(W) has an
# unbounded worst case: the set is a cylinder along the unidentified directions.
IDENTIFIED_RTOL = 1e-6


@runtime_checkable
class Coordinates(Protocol):
    """A linear map from (x, φ) to the k coordinates in which a set lives."""

    @property
    def dim(self) -> int: ...

    def transform(self, contexts: np.ndarray, features: np.ndarray) -> np.ndarray:
        """z for contexts (n, d_x) and features (n, d_φ) or (n, A, d_φ): shape (n, [A,] k)."""
        ...

    def to_coordinates(self, theta: np.ndarray) -> np.ndarray:
        """Θ (…, d_x, d_φ) in these coordinates, shape (…, k)."""
        ...


@runtime_checkable
class UncertaintySet(Protocol):
    """What the pessimistic solver needs of a set: coordinates and a support function."""

    coordinates: Coordinates

    def lower_bound(self, z: np.ndarray) -> np.ndarray:
        """min_{θ ∈ set} θᵀ z over the last axis of z."""
        ...


def broadcast_contexts(contexts: np.ndarray, features: np.ndarray) -> np.ndarray:
    """Contexts (n, d_x) reshaped to broadcast against features (n, …, d_φ)."""
    return contexts.reshape(contexts.shape[0], *([1] * (features.ndim - 2)), contexts.shape[1])


@dataclass(frozen=True, eq=False)
class VecCoordinates:
    """vec(Θ) in row-major order: z = vec(x φᵀ), k = d_x·d_φ (the MLE baselines)."""

    d_x: int
    d_phi: int

    @property
    def dim(self) -> int:
        return self.d_x * self.d_phi

    def transform(self, contexts, features):
        outer = broadcast_contexts(contexts, features)[..., :, None] * features[..., None, :]
        return outer.reshape(*features.shape[:-1], self.dim)

    def to_coordinates(self, theta):
        return theta.reshape(*theta.shape[:-2], self.dim)


@dataclass(frozen=True, eq=False)
class EllipsoidSet:
    """{θ : (θ − θ̂)ᵀ W (θ − θ̂) ≤ R²}, a cylinder along the null space of W.

    Parameters
    ----------
    center : ndarray, shape (k,)
        θ̂.
    shape : ndarray, shape (k, k)
        W, positive semi-definite: a Gram matrix Σ z zᵀ (the paper), a Fisher
        information Σ p̂(1−p̂) z zᵀ (Wald) or an inverse posterior covariance.
    radius : float
        R (the paper's C).
    coordinates : Coordinates
    kind : str
        ``"gram"``, ``"wald"`` or ``"credible"``: what W and R mean.
    level : float or None
        Nominal coverage for calibrated kinds; None for the paper's tuned C₂ set,
        which is a penalty, not a confidence set.
    """

    center: np.ndarray
    shape: np.ndarray
    radius: float
    coordinates: Coordinates
    kind: str = "gram"
    level: float | None = None

    def __post_init__(self):
        k = self.center.shape[0]
        if self.shape.shape != (k, k):
            raise ValueError(f"shape must be ({k}, {k}) to match center, got {self.shape.shape}")
        if not np.isfinite(self.radius) or self.radius < 0:
            raise ValueError(f"radius must be finite and >= 0, got {self.radius}")
        self._eigen  # noqa: B018 - validates that W is positive semi-definite

    @cached_property
    def _eigen(self) -> tuple[np.ndarray, np.ndarray]:
        vals, vecs = np.linalg.eigh(0.5 * (self.shape + self.shape.T))
        top = max(vals.max(), np.finfo(float).tiny)
        if vals.min() < -1e-8 * top:
            raise ValueError(f"shape (W) must be positive semi-definite; its smallest eigenvalue is "
                             f"{vals.min():.3g} against a largest of {top:.3g}")
        keep = vals > RANGE_RTOL * top
        return vals[keep], vecs[:, keep]

    @property
    def dim(self) -> int:
        return self.center.shape[0]

    @property
    def effective_dim(self) -> int:
        """k_eff = rank of W: the directions some comparison reaches."""
        return self._eigen[0].shape[0]

    @cached_property
    def factor(self) -> np.ndarray:
        """L (k × k_eff) with θ = θ̂ + R L u, ‖u‖ ≤ 1 spanning the set within range(W)."""
        vals, vecs = self._eigen
        return vecs / np.sqrt(vals)

    def _split(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """‖z‖_{W⁻¹} and whether z lies in range(W), from one product with W's eigenvectors."""
        vals, vecs = self._eigen
        zq = z @ vecs
        total = np.einsum("...i,...i->...", z, z)
        # ‖z − QQᵀz‖² = ‖z‖² − ‖Qᵀz‖² for orthonormal Q: one GEMM instead of two.
        outside = total - np.einsum("...i,...i->...", zq, zq)
        return np.linalg.norm(zq / np.sqrt(vals), axis=-1), outside <= IDENTIFIED_RTOL**2 * total

    def identified(self, z: np.ndarray) -> np.ndarray:
        """Whether each z lies in range(W), so that its worst case is finite."""
        return self._split(z)[1]

    def dual_norm(self, z: np.ndarray) -> np.ndarray:
        """‖z‖_{W⁻¹} (pseudo-inverse), the width of the set along z per unit radius."""
        return self._split(z)[0]

    def lower_bound(self, z: np.ndarray) -> np.ndarray:
        """θ̂ᵀz − R‖z‖_{W⁻¹}; −inf where z leaves range(W) (the set is unbounded along null(W))."""
        width, inside = self._split(z)
        return np.where(inside, z @ self.center - self.radius * width, -np.inf)

    def distance(self, theta: np.ndarray) -> np.ndarray:
        """‖θ − θ̂‖_W for θ of shape (…, k)."""
        d = theta - self.center
        return np.sqrt(np.maximum(np.einsum("...i,ij,...j->...", d, self.shape, d), 0.0))

    def contains(self, theta: np.ndarray) -> np.ndarray:
        """Whether θ (…, k) lies in the set."""
        return self.distance(theta) <= self.radius * (1 + 1e-12)

    def __repr__(self) -> str:
        lvl = "" if self.level is None else f", level={self.level:g}"
        return (f"EllipsoidSet(kind={self.kind!r}, k={self.dim}, k_eff={self.effective_dim}, "
                f"radius={self.radius:.4g}{lvl})")


def wald_set(center: np.ndarray, information: np.ndarray, level: float,
             coordinates: Coordinates) -> EllipsoidSet:
    """Asymptotic Wald set {θ : (θ − θ̂)ᵀ I (θ − θ̂) ≤ χ²_{k_eff}(level)}, k_eff = rank I."""
    unit = EllipsoidSet(center, information, 1.0, coordinates, kind="wald", level=level)
    return replace(unit, radius=float(np.sqrt(stats.chi2.ppf(level, unit.effective_dim))))


@dataclass(frozen=True, eq=False)
class DrawsSet:
    """The convex hull of parameter draws θ_1 … θ_J (e.g. posterior draws inside a credible region).

    ``lower_bound(z) = min_j θ_jᵀz``: the hull's support function, exact for the
    hull. It guarantees nothing beyond the draws: a hull of a few thousand draws in
    ~80 dimensions is much smaller than the credible ellipsoid of the same level
    (its support reaches ~3.5σ along a direction, the ellipsoid's ~10σ).

    Parameters
    ----------
    draws : ndarray, shape (J, k)
    coordinates : Coordinates
    kind : str
        ``"draws"``.
    level : float or None
        The credible level of the region the draws were selected from.
    """

    draws: np.ndarray
    coordinates: Coordinates
    kind: str = "draws"
    level: float | None = None

    def __post_init__(self):
        if self.draws.ndim != 2 or self.draws.shape[0] == 0:
            raise ValueError(f"draws must be a non-empty (J, k) array, got shape {self.draws.shape}")
        if not np.isfinite(self.draws).all():
            raise ValueError("draws contain NaN or infinity")

    @property
    def dim(self) -> int:
        return self.draws.shape[1]

    def lower_bound(self, z: np.ndarray) -> np.ndarray:
        """min_j θ_jᵀz over the draws."""
        return (z @ self.draws.T).min(axis=-1)

    def contains(self, theta: np.ndarray) -> bool:
        """Whether θ (k,) lies in the convex hull of the draws (an LP feasibility check)."""
        from scipy.optimize import linprog

        j = self.draws.shape[0]
        res = linprog(np.zeros(j), A_eq=np.vstack([self.draws.T, np.ones((1, j))]),
                      b_eq=np.append(theta, 1.0), bounds=(0, None), method="highs")
        return bool(res.status == 0)

    def __repr__(self) -> str:
        lvl = "" if self.level is None else f", level={self.level:g}"
        return f"DrawsSet(kind={self.kind!r}, draws={self.draws.shape[0]}, k={self.dim}{lvl})"


@dataclass(frozen=True, eq=False)
class QuantileSet:
    """Pointwise lower posterior quantile: ``lower_bound(z)`` = the (1 − level) quantile of θ_jᵀz.

    Not a set at all, strictly: each z gets its own worst case, so it guarantees
    P(θᵀz ≥ bound) ≈ level for each z separately and nothing jointly. It is not
    convex, so only ``objective="relaxed"`` accepts it. A 90% pointwise bound is
    about c ≈ 1.28/√γ standard deviations (DESIGN.md, pessimism point 4).
    """

    draws: np.ndarray
    coordinates: Coordinates
    level: float = 0.9
    kind: str = "quantile"

    def __post_init__(self):
        if self.draws.ndim != 2 or self.draws.shape[0] < 2:
            raise ValueError(f"draws must be a (J, k) array with J >= 2, got shape {self.draws.shape}")
        if not 0.0 < self.level < 1.0:
            raise ValueError(f"level must be in (0, 1), got {self.level}")

    @property
    def dim(self) -> int:
        return self.draws.shape[1]

    def lower_bound(self, z: np.ndarray) -> np.ndarray:
        return np.quantile(z @ self.draws.T, 1.0 - self.level, axis=-1)

    def __repr__(self) -> str:
        return f"QuantileSet(draws={self.draws.shape[0]}, k={self.dim}, level={self.level:g})"
