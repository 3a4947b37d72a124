"""The unconstrained MLE of Θ (the paper's initial estimate Θ̂₀ and MLE baselines)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .._checks import checks_data
from .._validation import LEVEL, check_finite, check_int, check_option, check_real
from ..config import get_config
from ..coordinates import VecCoordinates
from ..data import PreferenceData
from ..design import information, support_gram
from ..model import COV_TYPES, Ties, margins, score_matrix
from ..results import (
    Diagnostics,
    Summary,
    WaldFit,
    check_fit_common,
    check_fit_theta,
    check_fit_ties,
    tie_header,
    wald_summary,
)
from ..sets import EllipsoidSet
from ._logistic import fit_logistic, fitted_nu, tie_likelihood


@dataclass(frozen=True, eq=False)
class MLEResult(WaldFit):
    """Unconstrained (optionally ridge-penalised) MLE Θ̂ of the contextual BTL model.

    It follows the :class:`~bayes_loco.results.Fit` protocol, in the vec(Θ)
    coordinates (k = d_x·d_φ): the MLE baselines' sets.

    Attributes
    ----------
    theta : ndarray, shape (d_x, d_φ)
        Θ̂. Directions that no comparison reaches stay at 0 (minimum-norm solution).
    data : PreferenceData
        The data it was fitted on (used by the baselines' uncertainty sets).
    nll : float
        The loss Σ_t w_t ℓ_t at Θ̂ (without the ridge term): the negative log-likelihood, or
        the quasi-likelihood of ``ties="half"`` with ties.
    max_abs_margin : float
        the largest absolute margin, max_t abs(x_tᵀ Θ̂ Δφ_t); above 30 the data are (quasi-)separable.
    separated : bool
        True when some fitted probabilities run off to 0 or 1 (a warning was issued).
    ridge : float
        The ridge λ of the penalty (λ/2)‖Θ‖²_F.
    diagnostics : Diagnostics
        Newton-CG's convergence, iterations, status, message and warnings.
    ties : {"half", "davidson"}
        How ties were read (:func:`fit_mle`).
    nu : float or None
        Davidson's ν̂ (``ties="davidson"``; 0 when the data have no tie); None for "half".
    cov_type : {"model", "sandwich"} or None
        The covariance of the Wald set and the summary's errors; None: the default,
        ``"sandwich"`` with half ties or sampling weights, ``"model"`` otherwise
        (:attr:`covariance` says which).
    """

    theta: np.ndarray
    data: PreferenceData
    nll: float
    max_abs_margin: float
    separated: bool
    ridge: float
    diagnostics: Diagnostics
    ties: Ties = "half"
    nu: float | None = None
    cov_type: str | None = None

    rank = None

    def __post_init__(self):
        data = check_fit_common(self)
        object.__setattr__(self, "theta", check_fit_theta(self.theta, "theta", data))
        check_finite(self.max_abs_margin, "max_abs_margin")
        check_real(self.ridge, "ridge", 0.0)
        check_fit_ties(self)
        if self.cov_type is not None:
            check_option(self.cov_type, "cov_type", COV_TYPES)

    @property
    def loglik(self) -> float:
        return -self.nll

    def __repr__(self) -> str:
        return (f"MLEResult(N={self.data.n_comparisons}, d_x={self.data.d_x}, d_phi={self.data.d_phi}, "
                f"loglik={self.loglik:.4g}, converged={self.diagnostics.converged}, "
                f"n_iter={self.diagnostics.n_iter}, separated={self.separated}, ridge={self.ridge:g})")

    @cached_property
    def coordinates(self) -> VecCoordinates:
        return VecCoordinates(self.data.d_x, self.data.d_phi)

    @property
    def estimate(self) -> np.ndarray:
        """vec(Θ̂), row-major."""
        return self.theta.ravel()

    def _gram(self, weights: np.ndarray | None = None) -> np.ndarray:
        """Σ_t w_t z_t z_tᵀ in vec(Θ) coordinates (without ``weights``: W), refused above 2 GiB.

        :func:`~bayes_loco.design.information`, which sums it on the data's support
        (:attr:`PreferenceData.support`) and leaves the rest zero.
        """
        d = self.coordinates.dim
        if d * d * 8 > get_config()["max_full_w_bytes"]:
            raise MemoryError(
                f"the MLE baseline's W is {d} x {d} ({d * d * 8 / 1024**3:.1f} GiB), above the "
                f"{get_config()["max_full_w_bytes"] / 1024**3:.0f} GiB limit; use the low-rank PRS fit at "
                f"this size")
        return information(self.coordinates, self.data, weights)

    def penalty_set(self, c2: float = 5.0) -> EllipsoidSet:
        """MLE-Pessimistic's set: ‖vec Θ − vec Θ̂‖_W ≤ C₂ sqrt(d_x d_φ / N), W = Σ z zᵀ (Gram).

        A tuned penalty, without a level; with counts, W and N are those of the expanded rows.

        Parameters
        ----------
        c2 : float
            C₂ ≥ 0, the paper's 5 by default.

        Returns
        -------
        EllipsoidSet
            ``kind="gram"`` in vec(Θ) coordinates (k = d_x·d_φ), no level.

        Raises
        ------
        MemoryError
            When W (d_x·d_φ × d_x·d_φ) would exceed 2 GiB: use the low-rank PRS fit.

        Examples
        --------
        >>> bl.fit_mle(data, ridge=1.0).penalty_set(c2=5.0)
        EllipsoidSet(kind='gram', k=21, k_eff=9, radius=1.323)
        """
        # W and N of the comparisons the rows stand for
        return EllipsoidSet.penalty(self.estimate, self._gram(), self.data.n_comparisons, self.coordinates,
                                    c2)

    def _fitted(self):
        """The data, the margins at Θ̂ and Σ_t c_t z_t z_tᵀ in vec(Θ) (refused above 2 GiB, as W)."""
        return self.data, margins(self.theta, self.data.contexts, self.data.delta), self._gram

    def summary(self, level: float = LEVEL) -> Summary:
        """Estimates of vec(Θ) with ``level`` Wald intervals, log-likelihood, ridge and warnings.

        Where only differences between features are identified (Δφ_t summing to 0, as
        in Bradley–Terry) the table lists them, ``"[c,j] − [c,0]"``, with their Wald
        intervals. ``level`` defaults to
        0.9 (every set's, prediction's and decision's default too); ``az.summary`` defaults to
        ``az.rcParams["stats.ci_prob"]`` (0.89 in ArviZ 1.x): the header's ``interval``
        says which level is printed.

        Parameters
        ----------
        level : float
            Level of the Wald intervals, in (0, 1).

        Returns
        -------
        Summary
            Printed, a header and the table of the identified entries of Θ̂, ``"[c,j]"``;
            ``.to_frame()`` gives the table as a DataFrame.

        Examples
        --------
        >>> table = bl.fit_mle(data, ridge=1.0).summary(level=0.9).to_frame()
        >>> list(table.columns)
        ['estimate', 'std_err', 'lower', 'upper']
        >>> len(table)                     # the k_eff = 9 identified entries of Θ̂
        9
        """
        title = "Unconstrained MLE (Newton-CG)" if self.diagnostics.method == "newton-cg" else \
            "Unconstrained MLE (Newton)"
        return wald_summary(title, self, self.data, level,
                            {"log-likelihood": self.loglik, "ridge": self.ridge,
                             "max |margin|": self.max_abs_margin, "separated": self.separated}
                            | tie_header(self, self.data))


def unbeaten_items(data: PreferenceData, shown: int = 5) -> str:
    """The separation's cause where it is plain: items of item-indexed data that won, or lost, every
    comparison they were in (a tie counting half a win), named; "" where none did."""
    if not data.indexed:
        return ""
    n_items = data.item_features.shape[0]
    weight, won = data.loss_weights, data.labels.astype(float)
    a0, a1 = data.actions[:, 0], data.actions[:, 1]
    wins = np.bincount(a1, weight * won, n_items) + np.bincount(a0, weight * (1 - won), n_items)
    losses = np.bincount(a1, weight * (1 - won), n_items) + np.bincount(a0, weight * won, n_items)
    names = data.item_names or tuple(f"item {a}" for a in range(n_items))
    parts = []
    for what, items in (("won", (losses == 0) & (wins > 0)), ("lost", (wins == 0) & (losses > 0))):
        found = [f"{names[a]!r} ({wins[a] + losses[a]:g})" for a in np.flatnonzero(items)]
        if found:
            more = f" and {len(found) - shown} more" if len(found) > shown else ""
            parts.append(f"{', '.join(found[:shown])}{more} {what} every comparison they were in")
    if not parts:
        return ""
    return (" Separation: " + "; ".join(parts) + " (comparisons in brackets), so their strengths run off to "
            "±infinity.")


@checks_data
def fit_mle(data: PreferenceData, *, ridge: float = 0.0, max_iter: int = 200,
            tol: float = 1e-8, ties: Ties = "half", cov_type: str | None = None) -> MLEResult:
    """Unconstrained MLE Θ̂ (d_x × d_φ) by trust-region Newton-CG.

    Gradient and Hessian-vector products are two GEMMs each (Xᵀ diag(w) ΔΦ), so
    the N × d_x·d_φ Kronecker design is never formed; they run on the data's
    support (:attr:`~bayes_loco.PreferenceData.support`), the entries of Θ̂ outside
    it being 0 in the minimum-norm (and in the ridge) solution.

    Parameters
    ----------
    data : PreferenceData
    ridge : float
        λ ≥ 0 of the penalty (λ/2)‖Θ‖²_F on the total negative log-likelihood.
        With imbalanced data the unpenalised MLE may not exist (rarely compared
        actions are separable); that is detected and warned about
        (``SeparationWarning``), and a small ridge such as 1.0 fixes it.
    max_iter : int
        Newton iterations.
    tol : float
        Gradient-norm tolerance on the mean negative log-likelihood (per unit of weight).
    ties : {"half", "davidson"}
        How a tie (y_t = ½) enters. ``"half"``: half a win each way, the loss
        −Σ_t w_t [y_t log σ(η_t) + (1 − y_t) log σ(−η_t)] (arena-rank's convention), a
        quasi-likelihood once there are ties or weights, so the Wald set is then the
        sandwich's. ``"davidson"``: Davidson's model with one tie parameter ν ≥ 0, fitted
        jointly (log ν) and stored as ``nu``; the Wald set profiles ν out. Without ties
        ν̂ = 0 (the boundary): a ``DataWarning``, and the Bradley–Terry fit with ν = 0.

    cov_type : {"model", "sandwich"} or None
        The covariance of the Wald set and the summary (statsmodels' ``nonrobust`` and
        ``HC0``); None: ``"sandwich"`` where the loss is a quasi-likelihood (half ties,
        sampling weights), ``"model"`` otherwise. Printed in the summary's header.

    Weights ``data.weights`` multiply each comparison's term; the Wald set reads them as
    sampling weights (statsmodels' ``var_weights``). Counts ``data.counts`` are frequency
    weights (``freq_weights``): the fit and both covariances equal those on the expanded rows.

    Returns
    -------
    MLEResult
        Θ̂ (``theta``, d_x × d_φ), its loss, separation flags and diagnostics.

    Examples
    --------
    >>> mle = bl.fit_mle(data, ridge=1.0)
    >>> mle
    MLEResult(N=300, d_x=3, d_phi=7, loglik=-159.4, converged=True, n_iter=5, separated=False, ridge=1)
    >>> mle.theta.shape
    (3, 7)
    """
    ridge = check_real(ridge, "ridge", 0.0)
    max_iter = check_int(max_iter, "max_iter", 1)
    tol = check_real(tol, "tol", 0.0, low_open=True)
    if cov_type is not None:
        check_option(cov_type, "cov_type", COV_TYPES)
    likelihood, log_nu, notes = tie_likelihood(data, ties, "fit_mle")
    # Entries of Θ outside the support never enter a margin: fitting them would leave them at 0.
    rows, cols = data.support
    x = data.contexts if rows.size == data.d_x else data.contexts[:, rows]
    delta = data.delta  # item-indexed data: gathers and segment sums, ΔΦ never formed
    if cols.size != data.d_phi:
        delta = delta.columns(cols) if data.indexed else delta[:, cols]
    dphi = delta
    shape = (rows.size, cols.size)

    def forward(flat):
        return margins(flat.reshape(shape), x, dphi)

    def adjoint(w):
        return score_matrix(w, x, dphi).ravel()

    gram = None
    if _exact_newton(data, shape[0] * shape[1]):
        def gram(c):
            return support_gram(data, rows, cols, c)

    start = time.perf_counter()
    fit = fit_logistic(forward, adjoint, likelihood, shape[0] * shape[1], ridge=ridge,
                       max_iter=max_iter, tol=tol, what="fit_mle", log_nu=log_nu, gram=gram,
                       separated_items=lambda: unbeaten_items(data))
    theta = np.zeros((data.d_x, data.d_phi))
    theta[np.ix_(rows, cols)] = fit.params.reshape(shape)
    return MLEResult(theta, data, fit.nll, fit.max_abs_margin, fit.separated, ridge,
                     fit.diagnostics("newton-cg" if gram is None else "newton-exact",
                                     time.perf_counter() - start, notes), ties,
                     fitted_nu(ties, fit), cov_type)


def _exact_newton(data: PreferenceData, k: int) -> bool:
    """Whether :func:`fit_mle` runs Newton's method on the whole k × k Hessian (else Newton-CG).

    Item-indexed data sum the Hessian by compared pair, so its cost hardly grows with N; formed
    differences pay N·k² multiplications for it, which beat conjugate gradients' hundreds of
    Hessian-vector products per step on the near-separated fits of small simulations (§5.1 at q = 10,
    N = 5,000, k = 580: minutes by Newton-CG) while N·k² stays below ``config["exact_newton_flops"]``.
    """
    if k > get_config()["exact_newton_max"]:
        return False
    return data.indexed or data.n * k * k <= get_config()["exact_newton_flops"]
