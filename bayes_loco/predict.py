"""Predictions of a fit on comparisons it has not seen: probabilities, intervals and rewards.

Every fit (the frequentist ones through :class:`~bayes_loco.results.WaldFit`, the
posterior) inherits :class:`Predictive`, so ``fit.predict_proba(data)`` works on a fit
just made and on one read back with :func:`bayes_loco.load`.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from .data import PreferenceData, check_data
from .model import margins


def predict_proba(fit, data: PreferenceData) -> np.ndarray:
    """P(y_t = 1) = σ(x_tᵀ Θ̂ Δφ_t) for every comparison of ``data`` under ``fit``'s Θ̂."""
    data = check_data(data)
    theta = np.asarray(fit.theta)
    if theta.shape != (data.d_x, data.d_phi):
        raise ValueError(f"data has d_x = {data.d_x}, d_phi = {data.d_phi}; the fit's Θ is "
                         f"{theta.shape[0]} × {theta.shape[1]}")
    return expit(margins(theta, data.contexts, data.differences))


class Predictive:
    """The prediction methods every fit has; each calls this module's function of the same name."""

    def predict_proba(self, data: PreferenceData) -> np.ndarray:
        """P(y_t = 1) for every comparison of ``data`` (:func:`bayes_loco.predict.predict_proba`)."""
        return predict_proba(self, data)
