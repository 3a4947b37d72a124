"""Newton (trust-region Newton-CG) for Bradley–Terry likelihoods given as linear maps.

Both the unconstrained MLE of Θ (a bilinear map, no Kronecker design) and the
reduced MLE of θ_rtv (an explicit N × k design) are generalised linear models in
η = A θ; they differ only in how η = A θ and Aᵀ w are computed, so one solver
serves both. The loss is a :class:`~bayes_loco.model.Likelihood`: a tie half a win
each way, or Davidson's model, whose λ = log ν joins θ as one more unknown.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.optimize import OptimizeResult, minimize
from threadpoolctl import threadpool_limits

from ..config import get_config
from ..data import PreferenceData
from ..exceptions import ConvergenceWarning, DataWarning, SeparationWarning
from ..model import Likelihood, check_ties
from ..results import Diagnostics, FitStatus


@dataclass(frozen=True)
class LogisticFit:
    """What :func:`fit_logistic` found; the public results carry it as their ``diagnostics``."""

    params: np.ndarray
    nll: float
    n_iter: int
    converged: bool
    message: str
    max_abs_margin: float
    n_extreme: int
    warning: str | None = None
    log_nu: float | None = None

    @property
    def separated(self) -> bool:
        return self.n_extreme > 0

    def diagnostics(self, method: str, seconds: float = np.nan, notes: tuple[str, ...] = ()) -> Diagnostics:
        """This fit as a :class:`~bayes_loco.results.Diagnostics`; ``notes``: warnings issued before it."""
        status = (FitStatus.SEPARATED if self.separated else
                  FitStatus.CONVERGED if self.converged else FitStatus.NOT_CONVERGED)
        return Diagnostics(method, self.converged, self.n_iter, status, self.message,
                           notes + (() if self.warning is None else (self.warning,)), seconds)


def fit_logistic(forward: Callable[[np.ndarray], np.ndarray],
                 adjoint: Callable[[np.ndarray], np.ndarray],
                 likelihood: Likelihood, n_params: int, *, ridge: float, max_iter: int,
                 tol: float, what: str, start: np.ndarray | None = None,
                 log_nu: float | None = None,
                 gram: Callable[[np.ndarray], np.ndarray] | None = None,
                 separated_items: Callable[[], str] | None = None) -> LogisticFit:
    """Minimise Σ_t w_t ℓ(y_t | η_t) + (ridge/2)‖θ‖² with η = forward(θ).

    Starts at ``start``, or θ = 0. Newton steps never move θ in directions that no
    comparison reaches (a singular Fisher information), so from θ = 0 with ``ridge=0``
    the result is the minimum-norm maximiser; a start must then have no component there.
    For Davidson's model (``likelihood.ties == "davidson"``) λ = log ν is one more unknown,
    not penalised, started at ``log_nu``. ``what`` names the estimate in warnings.

    ``gram(c)`` = Σ_t c_t z_t z_tᵀ (n_params square), where it is cheap (item-indexed data:
    Laplacians of the compared items), turns the solver into Newton's method on the whole Hessian
    (:func:`newton_exact`): a few iterations where conjugate gradients on an ill-conditioned
    leaderboard (rarely compared items) take hundreds of Hessian-vector products. Its steps,
    −H⁺g, stay in range(H) too. ``separated_items()``, when the fit is separated, names the items
    that cause it for the warning.
    """
    n = likelihood.labels.shape[0]
    # The mean loss per unit weight: the tolerance means the same with and without weights.
    scale = likelihood.total_weight
    extra = likelihood.n_extra

    def split(x):
        return (x, None) if not extra else (x[:-1], x[-1])

    def fun(x):
        theta, lam = split(x)
        value, d_eta, d_lam = likelihood.derivatives(forward(theta), lam)
        value = value + 0.5 * ridge * theta @ theta
        grad = adjoint(d_eta) + ridge * theta
        if extra:
            grad = np.append(grad, d_lam.sum())
        return value / scale, grad / scale

    hessp, hess = _second_order(forward, adjoint, likelihood, split, ridge, scale, n_params, gram)

    def solve(x0, gtol, steps=max_iter):
        # ``steps`` bounds exact Newton only; trust-ncg's separation re-solve keeps max_iter as before.
        if gram is not None:
            return newton_exact(fun, hess, x0, gtol, steps)
        return minimize(fun, x0, jac=True, hessp=hessp, method="trust-ncg",
                        options={"gtol": gtol, "maxiter": max_iter})

    x0 = np.zeros(n_params) if start is None else np.asarray(start, dtype=float)
    if extra:
        x0 = np.append(x0, log_nu)
    res = solve(x0, tol)
    params, lam = split(res.x)
    eta = forward(params)
    # trust-ncg reports "failure to predict improvement" once rounding dominates the model's
    # prediction; that is convergence when the gradient is already near the tolerance.
    converged = bool(res.success) or float(np.linalg.norm(res.jac)) <= 10 * tol
    n_extreme = 0
    if converged:
        # Exact Newton reaches a finite maximiser's 1e4 times tighter tolerance in a step or two
        # (quadratic convergence); on a separated fit it would run on for hundreds of steps.
        tight = solve(res.x, tol * 1e-4, min(max_iter, get_config()["recession_newton_steps"]))
        scale = max(1.0, float(np.linalg.norm(res.x)))
        # Large margins alone are no evidence: a strong, well-identified signal has them too. A finite
        # maximiser moves by ~tol/curvature; a separated fit runs on, in θ or (where θ is already long in
        # weakly identified directions) in the margins of the separated comparisons.
        grown = int((np.abs(forward(split(tight.x)[0])) > np.abs(eta) + 1.0).sum())
        moved = float(np.linalg.norm(tight.x - res.x))
        receding = grown > 0 or moved > get_config()["recession_rtol"] * scale
        n_extreme = max(grown, 1) if receding else 0
        if gram is not None and not receding:
            # exact Newton: the tighter solve is the MLE to rounding, kept (its steps counted too)
            res = OptimizeResult({**res, "x": tight.x, "fun": tight.fun, "jac": tight.jac,
                                  "nit": res.nit + tight.nit})
            params, lam = split(res.x)
            eta = forward(params)
    max_abs_margin = float(np.abs(eta).max())
    hint = separated_items() if n_extreme and separated_items is not None else ""
    warning = _warn_fit(what, n_extreme, n, max_abs_margin, converged, res, tol, hint)
    return LogisticFit(params, likelihood.value(eta, lam), int(res.nit), converged, str(res.message),
                       max_abs_margin, n_extreme, warning, None if lam is None else float(lam))


def _second_order(forward, adjoint, likelihood: Likelihood, split, ridge: float, scale: float, n_params: int,
                  gram):
    """The Hessian of :func:`fit_logistic`'s mean loss as a product ``hessp(x, v)`` (curvature cached per x)
    and, where ``gram`` is given, whole: ``hess(x)`` (the θ-block Σ_t c_t z_t z_tᵀ + ridge·I, bordered by the
    λ row and column for Davidson's model)."""
    extra = likelihood.n_extra
    curvature = {}

    def hessp(x, v):
        key = x.tobytes()
        if key not in curvature:
            curvature.clear()
            theta, lam = split(x)
            curvature[key] = likelihood.curvature(forward(theta), lam)
        c_eta, c_cross, c_lam = curvature[key]
        if not extra:
            return (adjoint(c_eta * forward(v)) + ridge * v) / scale
        v_theta, v_lam = split(v)
        av = forward(v_theta)
        h_theta = adjoint(c_eta * av + c_cross * v_lam) + ridge * v_theta
        return np.append(h_theta, c_cross @ av + c_lam * v_lam) / scale

    def hess(x):
        theta, lam = split(x)
        c_eta, c_cross, c_lam = likelihood.curvature(forward(theta), lam)
        block = gram(c_eta) + ridge * np.eye(n_params)
        if extra:
            border = adjoint(c_cross)
            block = np.block([[block, border[:, None]], [border[None, :], np.array([[c_lam]])]])
        return block / scale

    return hessp, hess


def newton_exact(fun, hess, x0: np.ndarray, gtol: float, max_iter: int) -> OptimizeResult:
    """Newton's method on the whole Hessian with a backtracking (Armijo) line search, for a convex loss.

    Each step is −H⁺g on range(H) (eigenvalues below ``config["range_rtol"]`` of the
    largest count as 0), so from a start in range(H) the iterates stay there: the minimum-norm
    maximiser where directions are not identified. Stops when ‖g‖ ≤ ``gtol``, or when the line
    search can no longer decrease the loss (rounding), reported as not successful.
    """
    x = np.asarray(x0, dtype=float)
    value, grad = fun(x)
    message, success = "maximum number of iterations reached", False
    it = 0
    for it in range(1, max_iter + 1):
        if float(np.linalg.norm(grad)) <= gtol:
            message, success, it = "gradient below gtol", True, it - 1
            break
        with threadpool_limits(1):  # a small eigh is several times slower on threads than on one core
            vals, vecs = np.linalg.eigh(hess(x))
        keep = vals > get_config()["range_rtol"] * max(float(vals.max()), np.finfo(float).tiny)
        step = -vecs[:, keep] @ ((vecs[:, keep].T @ grad) / vals[keep])
        slope = float(grad @ step)
        t = 1.0
        while True:
            trial_value, trial_grad = fun(x + t * step)
            if trial_value <= value + 1e-4 * t * slope or t < 1e-10:
                break
            t *= 0.5
        if not trial_value < value and t < 1e-10:
            message = "the line search cannot decrease the loss further (rounding)"
            break
        x, value, grad = x + t * step, trial_value, trial_grad
    return OptimizeResult(x=x, fun=value, jac=grad, nit=it, success=success, message=message)


def _warn_fit(what: str, n_extreme: int, n: int, max_abs_margin: float, converged: bool, res, tol: float,
              hint: str = "") -> str | None:
    """Warn (from the fit's caller) of separable data or of Newton-CG stopping early; the warning's text."""
    warning, category = None, None
    if n_extreme:
        warning = (f"{what}: the data look separable: {n_extreme} of {n} comparisons are fitted ever "
                   "closer to probability 0 or 1 as the tolerance tightens "
                   f"(max |η| = {max_abs_margin:.3g}), so the unpenalised MLE does not exist and this fit is "
                   f"not trustworthy.{hint} Pass a small ridge (e.g. ridge=1.0) or use more data for rarely "
                   "compared actions.")
        category = SeparationWarning
    elif not converged:
        warning = (f"{what}: Newton-CG stopped after {int(res.nit)} iterations without reaching "
                   f"gtol={tol:g} ({res.message}). Increase max_iter or pass a small ridge.")
        category = ConvergenceWarning
    if warning is not None:
        warnings.warn(warning, category, stacklevel=5)
    return warning


def tie_likelihood(data: PreferenceData, ties: str,
                   what: str) -> tuple[Likelihood, float | None, tuple[str, ...]]:
    """The loss a fit of ``data`` minimises under ``ties``, the start of λ = log ν, and the warnings issued.

    The start is Davidson's ν̂ at η = 0: P(tie) = ν/(2 + ν) equal to the weighted share of ties.
    Without any tie ν̂ = 0 is on the boundary (λ runs off to −∞) and the model is
    Bradley–Terry's: that is fitted instead, with the "half" loss (which has no tie to read),
    λ None and a :class:`~bayes_loco.exceptions.DataWarning`; :func:`fitted_nu` then gives ν = 0.
    Data that are all ties have ν̂ = ∞ and are refused.
    """
    check_ties(ties)
    likelihood = Likelihood.of(data, ties)
    if ties == "half":
        return likelihood, None, ()
    tied = data.ties
    if not tied.any():
        note = (f"{what}: ties='davidson', but no comparison is a tie, so Davidson's ν̂ = 0, on the "
                "boundary (log ν runs off to -inf) where the model is Bradley-Terry's: fitted as "
                "Bradley-Terry, nu = 0. On data without ties use ties='half' (the same fit, no ν).")
        warnings.warn(note, DataWarning, stacklevel=4)
        return Likelihood.of(data, "half"), None, (note,)
    if tied.all():
        raise ValueError(f"{what}: every comparison is a tie, so Davidson's ν̂ is infinite and Θ is not "
                         "identified; use ties='half' (which fits Θ = 0 to them) or data with decisions")
    weights = data.loss_weights
    share = float(weights[tied].sum() / weights.sum())
    return likelihood, float(np.log(2 * share / (1 - share))), ()


def fitted_nu(ties: str, fit: LogisticFit) -> float | None:
    """ν̂ of a fit made with :func:`tie_likelihood`'s loss: None for "half", 0 on the no-tie boundary."""
    if ties == "half":
        return None
    return 0.0 if fit.log_nu is None else float(np.exp(fit.log_nu))
