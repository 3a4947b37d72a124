"""Newton (trust-region Newton-CG) for Bernoulli-logit likelihoods given as linear maps.

Both the unconstrained MLE of Θ (a bilinear map, no Kronecker design) and the
reduced MLE of θ_rtv (an explicit N × k design) are logistic regressions; they
differ only in how η = A θ and Aᵀ w are computed, so one solver serves both.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from ..exceptions import ConvergenceWarning, SeparationWarning
from ..model import fisher_weights, neg_log_likelihood, residuals
from ..results import Diagnostics, FitStatus

# Separation test by recession: re-solving with a 1e4 times tighter gradient tolerance moves a
# finite maximiser by ~tol/curvature, but a separated fit runs on (‖θ‖ grows like log(1/tol)).
RECESSION_RTOL = 1e-2


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

    @property
    def separated(self) -> bool:
        return self.n_extreme > 0

    def diagnostics(self, method: str, seconds: float = np.nan) -> Diagnostics:
        """This fit as a :class:`~bayes_loco.results.Diagnostics`."""
        status = (FitStatus.SEPARATED if self.separated else
                  FitStatus.CONVERGED if self.converged else FitStatus.NOT_CONVERGED)
        return Diagnostics(method, self.converged, self.n_iter, status, self.message,
                           () if self.warning is None else (self.warning,), seconds)


def fit_logistic(forward: Callable[[np.ndarray], np.ndarray],
                 adjoint: Callable[[np.ndarray], np.ndarray],
                 labels: np.ndarray, n_params: int, *, ridge: float, max_iter: int,
                 tol: float, what: str, start: np.ndarray | None = None) -> LogisticFit:
    """Minimise Σ_t −log p(y_t | η_t) + (ridge/2)‖θ‖² with η = forward(θ).

    Starts at ``start``, or θ = 0. Newton steps never move θ in directions that no
    comparison reaches (a singular Fisher information), so from θ = 0 with ``ridge=0``
    the result is the minimum-norm maximiser; a start must then have no component there.
    ``what`` names the estimate in warnings.
    """
    n = labels.shape[0]

    def fun(theta):
        eta = forward(theta)
        value = neg_log_likelihood(eta, labels) + 0.5 * ridge * theta @ theta
        grad = adjoint(residuals(eta, labels)) + ridge * theta
        return value / n, grad / n

    curvature = {}

    def hessp(theta, v):
        key = theta.tobytes()
        if key not in curvature:
            curvature.clear()
            curvature[key] = fisher_weights(forward(theta))
        return (adjoint(curvature[key] * forward(v)) + ridge * v) / n

    x0 = np.zeros(n_params) if start is None else np.asarray(start, dtype=float)
    res = minimize(fun, x0, jac=True, hessp=hessp, method="trust-ncg",
                   options={"gtol": tol, "maxiter": max_iter})
    eta = forward(res.x)
    # trust-ncg reports "failure to predict improvement" once rounding dominates the model's
    # prediction; that is convergence when the gradient is already near the tolerance.
    converged = bool(res.success) or float(np.linalg.norm(res.jac)) <= 10 * tol
    receding = False
    if converged:
        tight = minimize(fun, res.x, jac=True, hessp=hessp, method="trust-ncg",
                         options={"gtol": tol * 1e-4, "maxiter": max_iter})
        scale = max(1.0, float(np.linalg.norm(res.x)))
        receding = float(np.linalg.norm(tight.x - res.x)) > RECESSION_RTOL * scale
    # Large margins alone are no evidence: a strong, well-identified signal has them too.
    n_extreme = max(int((np.abs(forward(tight.x)) > np.abs(eta) + 1.0).sum()), 1) if receding else 0
    max_abs_margin = float(np.abs(eta).max())
    warning, category = None, None
    if n_extreme:
        warning = (f"{what}: the data look separable: {n_extreme} of {n} comparisons are fitted ever "
                   "closer to probability 0 or 1 as the tolerance tightens "
                   f"(max |η| = {max_abs_margin:.3g}), so the unpenalised MLE does not exist and this fit is "
                   "not trustworthy. Pass a small ridge (e.g. ridge=1.0) or use more data for rarely "
                   "compared actions.")
        category = SeparationWarning
    elif not converged:
        warning = (f"{what}: Newton-CG stopped after {int(res.nit)} iterations without reaching "
                   f"gtol={tol:g} ({res.message}). Increase max_iter or pass a small ridge.")
        category = ConvergenceWarning
    if warning is not None:
        warnings.warn(warning, category, stacklevel=4)
    return LogisticFit(res.x, float(neg_log_likelihood(eta, labels)), int(res.nit), converged,
                       str(res.message), max_abs_margin, n_extreme, warning)
