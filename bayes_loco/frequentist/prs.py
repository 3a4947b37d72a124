"""Pessimism in Reduced Subspace (PRS): reduced MLE θ̂_rtv, W and the ellipsoid.

Conventions (DESIGN.md, 1–2): W is the Gram matrix Σ_t z_t z_tᵀ of the reduced
features over the N − N₀ estimation comparisons (as in the paper's proofs, not
the text's (1/n)Σ), and C = C₂·sqrt(k/(N − N₀)). With that pair the set is a tuned
penalty, not a confidence set: it covered θ*_rtv in 0 of 6 seeds on the paper's
simulation with C₂ = 5. :meth:`PRSResult.confidence_set` gives the calibrated
(Wald) alternative.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .._validation import check_real
from ..coordinates import RTVBasis, rtv_basis
from ..data import PreferenceData
from ..model import fisher_information
from ..sets import EllipsoidSet, wald_set
from ._logistic import LogisticFit, fit_logistic
from .fgd import LowRankResult, fit_low_rank


@dataclass(frozen=True, eq=False)
class PRSResult:
    """The PRS fit: reduced MLE and its W-norm ellipsoid.

    Attributes
    ----------
    theta_rtv : ndarray, shape (k,)
        Reduced MLE θ̂_rtv in the RTV coordinates of ``basis``.
    basis : RTVBasis
        Û, V̂ and r from the low-rank fit on the first N₀ comparisons.
    gram : ndarray, shape (k, k)
        W = Σ_t z_t z_tᵀ over the estimation comparisons.
    c2 : float
        C₂; the radius is C = C₂·sqrt(k/(N − N₀)).
    low_rank : LowRankResult
        The FGD fit that defined the subspace.
    reduced : LogisticFit
        Diagnostics of the reduced MLE (converged, n_iter, separation).
    estimation_data : PreferenceData
        The N − N₀ comparisons θ̂_rtv and W were computed from.
    n_initial : int or None
        N₀; None means no split (both steps use all N comparisons).
    """

    theta_rtv: np.ndarray
    basis: RTVBasis
    gram: np.ndarray
    c2: float
    low_rank: LowRankResult
    reduced: LogisticFit
    estimation_data: PreferenceData
    n_initial: int | None

    @property
    def rank(self) -> int:
        return self.basis.rank

    @property
    def k(self) -> int:
        """k = (d_x + d_φ) r − r²."""
        return self.basis.dim

    @property
    def radius(self) -> float:
        """C = C₂·sqrt(k/(N − N₀))."""
        return self.c2 * float(np.sqrt(self.k / self.estimation_data.n))

    @property
    def theta(self) -> np.ndarray:
        """Θ̂ = Û [[B₁₁, B₁₂], [B₂₁, 0]] V̂ᵀ from θ̂_rtv (d_x × d_φ)."""
        return self.basis.to_theta(self.theta_rtv)

    @cached_property
    def uncertainty_set(self) -> EllipsoidSet:
        """The paper's set {θ : ‖θ − θ̂_rtv‖_W ≤ C} (a tuned penalty; ``level`` is None)."""
        return EllipsoidSet(self.theta_rtv, self.gram, self.radius, self.basis, kind="gram")

    @cached_property
    def _design(self) -> np.ndarray:
        return self.basis.transform(self.estimation_data.contexts, self.estimation_data.differences)

    def confidence_set(self, level: float = 0.9) -> EllipsoidSet:
        """Asymptotic Wald set for θ_rtv at ``level``.

        W = Σ_t p̂_t(1 − p̂_t) z_t z_tᵀ (Fisher information at θ̂_rtv) and
        R² = χ²_{k_eff}(level), with k_eff = rank W: directions no comparison
        reaches are not identified and the set is a cylinder along them. Its
        coverage of θ*_rtv is below nominal because the reduced likelihood drops
        Θ'₂₂ (DESIGN.md, pessimism point 5).
        """
        level = check_real(level, "level", 0.0, 1.0, low_open=True, high_open=True)
        z = self._design
        return wald_set(self.theta_rtv, fisher_information(z, z @ self.theta_rtv), level, self.basis)

    def __repr__(self) -> str:
        split = "no split" if self.n_initial is None else f"N0={self.n_initial}"
        return (f"PRSResult(rank={self.rank}, k={self.k}, k_eff={self.uncertainty_set.effective_dim}, "
                f"n={self.estimation_data.n}, {split}, C2={self.c2:g}, C={self.radius:.4g}, "
                f"reduced converged={self.reduced.converged})")


def fit_prs(data: PreferenceData, rank: int, *, c2: float = 5.0, n_initial: int | None = None,
            ridge: float = 0.0, low_rank: LowRankResult | None = None) -> PRSResult:
    """Fit PRS: low-rank fit → RTV basis → reduced MLE θ̂_rtv and W (Gram) → ellipsoid.

    Parameters
    ----------
    data : PreferenceData
    rank : int
        r.
    c2 : float
        C₂ ≥ 0 of the radius C = C₂·sqrt(k/(N − N₀)); the paper uses 5.
    n_initial : int or None
        N₀: the first N₀ comparisons fit the low-rank estimate and the rest the
        reduced MLE and W (the paper's appendix uses N₀/N ∈ {0.2, 0.5, 0.8}).
        None (default, the paper's main experiments) uses all data for both.
    ridge : float
        λ of (λ/2)‖·‖² in the MLE, FGD and reduced MLE; set it when rarely
        compared actions are separable (imbalance q = 10 with small N).
    low_rank : LowRankResult, optional
        A precomputed low-rank fit on the first N₀ comparisons, to reuse.
    """
    if not isinstance(data, PreferenceData):
        raise TypeError(f"data must be a PreferenceData, got {type(data).__name__}")
    c2 = check_real(c2, "c2", 0.0)
    ridge = check_real(ridge, "ridge", 0.0)
    initial, estimation = data.split(n_initial)
    if low_rank is None:
        low_rank = fit_low_rank(initial, rank, ridge=ridge)
    elif low_rank.rank != rank:
        raise ValueError(f"low_rank has rank {low_rank.rank}, but rank={rank} was asked for")
    basis = rtv_basis(low_rank.theta, rank)
    z = basis.transform(estimation.contexts, estimation.differences)
    reduced = fit_logistic(lambda t: z @ t, lambda w: z.T @ w, estimation.labels, basis.dim,
                           ridge=ridge, max_iter=200, tol=1e-8, what="fit_prs (reduced MLE)")
    return PRSResult(reduced.params, basis, z.T @ z, c2, low_rank, reduced, estimation, n_initial)
