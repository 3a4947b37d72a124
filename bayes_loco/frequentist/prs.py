"""Pessimism in Reduced Subspace (PRS): reduced MLE θ̂_rtv, W and the ellipsoid.

Conventions (docs/design.md, 1–2): W is the Gram matrix Σ_t z_t z_tᵀ of the reduced
features over the N − N₀ estimation comparisons (as in the paper's proofs, not
the text's (1/n)Σ), and C = C₂·sqrt(k/(N − N₀)). With that pair the set is a tuned
penalty, not a confidence set: it covered θ*_rtv in 0 of 6 seeds on the paper's
simulation with C₂ = 5. :meth:`PRSResult.calibrated_set` gives the calibrated
(Wald) alternative.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .._checks import checks_data
from .._validation import (
    LEVEL,
    as_float_array,
    check_finite,
    check_instance,
    check_int,
    check_real,
    check_shape,
)
from ..config import get_config
from ..coordinates import RTVBasis
from ..data import PreferenceData
from ..design import design, design_operator, gram_rows, information
from ..model import Ties, check_ties
from ..results import (
    Diagnostics,
    FitStatus,
    InRTVCoordinates,
    Summary,
    WaldFit,
    check_fit_common,
    check_fit_ties,
    tie_header,
    wald_summary,
)
from ..sets import EllipsoidSet
from ._logistic import fit_logistic, fitted_nu, tie_likelihood
from .fgd import LowRankResult, fit_low_rank


@dataclass(frozen=True, eq=False)
class PRSResult(InRTVCoordinates, WaldFit):
    """The PRS fit: reduced MLE θ̂_rtv in the RTV coordinates of a low-rank fit, and W.

    It follows the :class:`~bayes_loco.results.Fit` protocol in the RTV coordinates
    of ``basis``.

    Attributes
    ----------
    theta_rtv : ndarray, shape (k,)
        Reduced MLE θ̂_rtv in the RTV coordinates of ``basis``.
    basis : RTVBasis
        Û, V̂ and r from the low-rank fit on the first N₀ comparisons.
    gram : ndarray, shape (k, k), or None
        W = Σ_t z_t z_tᵀ over the estimation comparisons; None when the design is
        too large to form at once (above ``config["design_block_bytes"]``):
        then :meth:`penalty_set` sums it block by block when first asked.
    low_rank : LowRankResult
        The FGD fit that defined the subspace.
    estimation_data : PreferenceData
        The N − N₀ comparisons θ̂_rtv and W were computed from.
    n_initial : int or None
        N₀; None means no split (both steps use all N comparisons).
    nll : float
        The loss Σ_t w_t ℓ_t of the reduced model at θ̂_rtv (the negative log-likelihood, or
        the quasi-likelihood of ``ties="half"`` with ties).
    max_abs_margin : float
        the largest absolute margin, max_t abs(z_tᵀ θ̂_rtv), over the estimation comparisons.
    separated : bool
        The reduced MLE ran off to infinity (a warning was issued).
    diagnostics : Diagnostics
        The reduced MLE's Newton-CG; ``converged`` also requires the FGD fit's
        convergence, and ``warnings`` holds both fits' warnings.
    ties : {"half", "davidson"}
        How ties were read (:func:`~bayes_loco.fit_mle`).
    nu : float or None
        Davidson's ν̂ of the reduced MLE (0 when the estimation comparisons have no tie);
        None for "half".
    """

    theta_rtv: np.ndarray
    basis: RTVBasis
    gram: np.ndarray | None
    low_rank: LowRankResult
    estimation_data: PreferenceData
    n_initial: int | None
    nll: float
    max_abs_margin: float
    separated: bool
    diagnostics: Diagnostics
    ties: Ties = "half"
    nu: float | None = None

    def __post_init__(self):
        data = check_fit_common(self, "estimation_data")
        check_fit_ties(self)
        basis = check_instance(self.basis, "basis", RTVBasis)
        if (basis.d_x, basis.d_phi) != (data.d_x, data.d_phi):
            raise ValueError(f"basis lives on (d_x, d_phi) = ({basis.d_x}, {basis.d_phi}), but "
                             f"estimation_data has ({data.d_x}, {data.d_phi})")
        theta = check_shape(as_float_array(self.theta_rtv, "theta_rtv", 1), "theta_rtv", (basis.dim,),
                            " (k RTV coordinates of basis)")
        object.__setattr__(self, "theta_rtv", theta)
        if self.gram is not None:
            gram = check_shape(as_float_array(self.gram, "gram", 2), "gram", (basis.dim, basis.dim))
            object.__setattr__(self, "gram", gram)
        low_rank = check_instance(self.low_rank, "low_rank", LowRankResult)
        if low_rank.rank != basis.rank:
            raise ValueError(f"low_rank has rank {low_rank.rank}, but basis has rank {basis.rank}")
        if self.n_initial is not None:
            check_int(self.n_initial, "n_initial", 1)
        check_finite(self.max_abs_margin, "max_abs_margin")

    @property
    def estimate(self) -> np.ndarray:
        """θ̂_rtv."""
        return self.theta_rtv

    @property
    def loglik(self) -> float:
        """−nll: the (quasi-)log-likelihood of the reduced model at θ̂_rtv on the estimation comparisons."""
        return -self.nll

    @property
    def data(self) -> PreferenceData:
        """All the comparisons (the low-rank fit's); θ̂_rtv and W use :attr:`estimation_data`."""
        return self.low_rank.data

    @property
    def theta(self) -> np.ndarray:
        """Θ̂ = Û [[B₁₁, B₁₂], [B₂₁, 0]] V̂ᵀ from θ̂_rtv (d_x × d_φ)."""
        return self.basis.to_theta(self.theta_rtv)

    def penalty_set(self, c2: float = 5.0) -> EllipsoidSet:
        """The paper's set {θ : ‖θ − θ̂_rtv‖_W ≤ C}, C = C₂·sqrt(k/(N − N₀)): a tuned penalty (no level).

        W = Σ_t z_t z_tᵀ (Gram) over the N − N₀ estimation comparisons, in the RTV
        coordinates of the low-rank fit.

        Parameters
        ----------
        c2 : float
            C₂ ≥ 0, the paper's 5 by default.

        Returns
        -------
        EllipsoidSet
            ``kind="gram"``, no level; :func:`bayes_loco.pessimistic_policy` accepts it.

        Examples
        --------
        >>> fit.penalty_set(c2=5.0)
        EllipsoidSet(kind='gram', k=16, k_eff=8, radius=1.155)
        """
        gram = self.gram if self.gram is not None else self._gram
        return EllipsoidSet.penalty(self.theta_rtv, gram, self.estimation_data.n_comparisons, self.basis, c2)

    @cached_property
    def _gram(self) -> np.ndarray:
        return information(self.basis, self.estimation_data)

    def _fitted(self):
        """The estimation data, the reduced model's margins z_tᵀθ̂_rtv and Σ_t c_t z_t z_tᵀ.

        Its Wald set covers θ*_rtv below nominal because the reduced likelihood
        drops Θ'₂₂ (docs/design.md, pessimism point 5).
        """
        forward, _, z = _reduced_design(self.basis, self.estimation_data)
        if z is not None and not self.estimation_data.indexed:  # the design fits in one block: formed
            return self.estimation_data, forward(self.theta_rtv), lambda c: gram_rows(z, c)
        return (self.estimation_data, forward(self.theta_rtv),
                lambda c: information(self.basis, self.estimation_data, c))

    def summary(self, level: float = LEVEL) -> Summary:
        """θ̂_rtv with ``level`` Wald intervals on its identified coordinates, the split, both fits' state.

        ``Newton steps`` are the reduced MLE's; without a split it starts at its
        optimum, FGD's own estimate, and a note says why it took none. ``level``
        defaults to 0.9 (every set's, prediction's and decision's default too);
        ``az.summary`` defaults to ``az.rcParams["stats.ci_prob"]`` (0.89 in ArviZ 1.x): the
        header's ``interval`` says which level is printed.

        Parameters
        ----------
        level : float
            Level of the Wald intervals, in (0, 1).

        Returns
        -------
        Summary
            Printed, a header and the table of the identified coordinates of θ̂_rtv;
            ``.to_frame()`` gives the table as a DataFrame.

        Examples
        --------
        >>> summary = fit.summary(level=0.9)
        >>> summary.header["N0"], summary.header["k_eff"]
        ('no split', 8)
        >>> len(summary.to_frame())        # the k_eff identified coordinates
        8
        """
        sv = ", ".join(f"{v:.3g}" for v in self.low_rank.singular_values)
        notes = ()
        if self.diagnostics.n_iter == 0 and self.n_initial is None:
            notes = ("The reduced MLE took no Newton step: without a split its start, FGD's Θ̂ in its own "
                     "RTV coordinates, is already its optimum (the RTV subspace is the tangent space at Θ̂, "
                     "where FGD's stationarity makes the reduced likelihood flat).",)
        return wald_summary("PRS: reduced MLE in RTV coordinates", self, self.estimation_data, level,
                            {"log-likelihood": -self.nll,
                             "N0": "no split" if self.n_initial is None else self.n_initial,
                             "FGD converged": self.low_rank.diagnostics.converged,
                             "FGD iterations": self.low_rank.diagnostics.n_iter, "singular values": sv}
                            | tie_header(self, self.estimation_data), notes, iterations="Newton steps")

    def __repr__(self) -> str:
        split = "no split" if self.n_initial is None else f"N0={self.n_initial}"
        # No k_eff: it needs W's factorisation (minutes at LLM width); summary() and penalty_set() give it.
        return (f"PRSResult(rank={self.rank}, k={self.k}, n={self.estimation_data.n_comparisons}, {split}, "
                f"converged={self.diagnostics.converged})")


@checks_data
def fit_prs(data: PreferenceData, rank: int, *, n_initial: int | None = None, ridge: float = 0.0,
            low_rank: LowRankResult | None = None, ties: Ties = "half", max_iter: int = 5000) -> PRSResult:
    """Fit PRS: low-rank fit → RTV basis → reduced MLE θ̂_rtv and W (Gram).

    The paper's set is ``fit.penalty_set(c2=5.0)``, the calibrated one
    ``fit.calibrated_set(level)``.

    Parameters
    ----------
    data : PreferenceData
    rank : int
        r.
    n_initial : int or None
        N₀: the first N₀ comparisons fit the low-rank estimate and the rest the
        reduced MLE and W (the paper's appendix uses N₀/N ∈ {0.2, 0.5, 0.8}).
        None (default, the paper's main experiments) uses all data for both.
    ridge : float
        λ of (λ/2)‖·‖² in the MLE, FGD and reduced MLE; set it when rarely
        compared actions are separable (imbalance q = 10 with small N).
    low_rank : LowRankResult, optional
        A precomputed low-rank fit on the first N₀ comparisons, to reuse (fitted with the
        same ``ties``).
    ties : {"half", "davidson"}
        How a tie enters (:func:`~bayes_loco.fit_mle`), in the low-rank fit and the reduced
        MLE; with ``"davidson"`` the reduced MLE fits log ν with θ_rtv.
    max_iter : int
        FGD's iterations when this fit makes the low-rank fit (:func:`~bayes_loco.fit_low_rank`'s
        ``max_iter``; at a reward model's width 100 choose about as well as a converged fit).

    Weights ``data.weights`` multiply each comparison's term in both fits.

    Returns
    -------
    PRSResult
        θ̂_rtv, the RTV basis, W, the low-rank fit and the diagnostics of both fits.

    Examples
    --------
    >>> bl.fit_prs(data, rank=2, ridge=1.0)
    PRSResult(rank=2, k=16, n=300, no split, converged=True)
    >>> bl.fit_prs(data, rank=2, n_initial=150, ridge=1.0).penalty_set().kind
    'gram'
    """
    ridge = check_real(ridge, "ridge", 0.0)
    max_iter = check_int(max_iter, "max_iter", 1)
    check_ties(ties)
    start = time.perf_counter()
    initial, estimation = data.split(n_initial)
    if low_rank is None:
        low_rank = fit_low_rank(initial, rank, ridge=ridge, ties=ties, max_iter=max_iter)
    else:
        check_instance(low_rank, "low_rank", LowRankResult,
                       "LowRankResult (fit_low_rank of the first n_initial comparisons)")
        if low_rank.rank != rank:
            raise ValueError(f"low_rank has rank {low_rank.rank}, but rank={rank} was asked for")
        if low_rank.data is not initial and low_rank.data.fingerprint != initial.fingerprint:
            first, call = (("data", "data") if n_initial is None else
                           (f"the first n_initial = {n_initial} comparisons", "data.split(n_initial)[0]"))
            raise ValueError(f"low_rank was fitted on other data than {first}: its subspace would not be "
                             f"these data's. Pass fit_low_rank({call}, rank), or leave low_rank out")
        if low_rank.ties != ties:
            raise ValueError(f"low_rank was fitted with ties={low_rank.ties!r}, this fit has ties={ties!r}: "
                             f"pass fit_low_rank(..., ties={ties!r}) or leave low_rank out")
    basis = low_rank.coordinates  # rtv_basis(Θ̂, r), cached on the fit
    forward, adjoint, z = _reduced_design(basis, estimation)
    # From Θ̂'s own coordinates (block 11 its singular values). Without a split that is the optimum: the
    # RTV subspace is the tangent space at Θ̂, where FGD's stationarity makes the convex reduced likelihood
    # flat. With a split it is a √N-close start. Θ̂ reaches no direction the comparisons do not.
    likelihood, log_nu, notes = tie_likelihood(estimation, ties, "fit_prs (reduced MLE)")
    if log_nu is not None and low_rank.nu:
        log_nu = float(np.log(low_rank.nu))
    reduced = fit_logistic(forward, adjoint, likelihood, basis.dim, ridge=ridge, max_iter=200,
                           tol=1e-8, what="fit_prs (reduced MLE)", start=low_rank.estimate, log_nu=log_nu)
    own = reduced.diagnostics("prs", time.perf_counter() - start, notes)
    fgd = low_rank.diagnostics
    converged = own.converged and fgd.converged
    status = own.status if own.status is not FitStatus.CONVERGED or converged else FitStatus.NOT_CONVERGED
    diagnostics = Diagnostics("prs", converged, own.n_iter, status, own.message, fgd.warnings + own.warnings,
                              own.seconds)
    # W of the comparisons the rows stand for (information counts them itself)
    gram = None if z is None else (information(basis, estimation) if estimation.indexed
                                   else gram_rows(z, estimation.counts))
    return PRSResult(reduced.params, basis, gram, low_rank, estimation, n_initial, reduced.nll,
                     reduced.max_abs_margin, reduced.separated, diagnostics, ties, fitted_nu(ties, reduced))


def _reduced_design(basis: RTVBasis, data: PreferenceData):
    """η = Zθ, Zᵀw and Z of the reduced model: the explicit design while it fits in one block, else
    :func:`~bayes_loco.design.design_operator` (Z is then None)."""
    if data.n * basis.dim * 8 <= get_config()["design_block_bytes"]:
        z = design(basis, data)
        return (lambda t: z @ t), (lambda w: z.T @ w), z
    operator = design_operator(basis, data)
    return operator.matvec, operator.rmatvec, None
