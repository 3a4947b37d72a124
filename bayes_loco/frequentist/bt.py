"""Plain Bradley–Terry: one reward vector for everyone, the leaderboard model the contextual one extends.

It is the contextual model with a single context x ≡ 1 (d_x = 1): Θ is one row θ (d_φ),
and P(a₁ ≻ a₂) = σ(θᵀ(φ(a₁) − φ(a₂))) whoever the user is. With one-hot features θ holds
the items' strengths, identified up to a common shift. It is the baseline against which
personalisation is judged on held-out users (notebook 06, ``scripts/heldout_study.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..data import PreferenceData, checks_data
from ..predict import Prediction
from ..results import Summary
from .mle import MLEResult, fit_mle


def one_context(data: PreferenceData) -> PreferenceData:
    """The same comparisons read with one context (x ≡ 1): plain Bradley–Terry's view of ``data``.

    Labels, ties and weights are kept; the users' contexts are dropped.
    """
    return PreferenceData(np.ones((data.n, 1)), data.differences, data.labels, weights=data.weights,
                          copy=False)


@dataclass(frozen=True, eq=False)
class BradleyTerryFit:
    """A plain Bradley–Terry fit: the MLE of Θ on :func:`one_context` data.

    It predicts any comparisons, whatever their contexts, by reading them with x ≡ 1, so it
    plugs into :func:`~bayes_loco.cross_validate` and :func:`~bayes_loco.score` like the
    contextual fits.

    Attributes
    ----------
    mle : MLEResult
        The fit on the one-context data (Θ̂ of shape 1 × d_φ, its Wald set and diagnostics).
    """

    mle: MLEResult

    def __post_init__(self):
        if not isinstance(self.mle, MLEResult) or self.mle.theta.shape[0] != 1:
            raise TypeError("mle must be an MLEResult of one context (from fit_bradley_terry)")

    @property
    def utilities(self) -> np.ndarray:
        """θ̂ (d_φ): every user's reward is θ̂ᵀφ(a). With one-hot features, the items' strengths."""
        return self.mle.theta[0]

    def predict_proba(self, data: PreferenceData) -> np.ndarray:
        """P(a_t1 preferred) for each comparison of ``data``, its contexts ignored."""
        return self.mle.predict_proba(one_context(data))

    def predict_interval(self, data: PreferenceData, level: float = 0.9) -> Prediction:
        """Pointwise Wald ``level`` intervals of :meth:`predict_proba`."""
        return self.mle.predict_interval(one_context(data), level)

    def summary(self, level: float = 0.95) -> Summary:
        """The MLE's summary: θ̂ with its Wald intervals."""
        return self.mle.summary(level)


@checks_data
def fit_bradley_terry(data: PreferenceData, *, ridge: float = 0.0, ties: str = "half") -> BradleyTerryFit:
    """Fit plain Bradley–Terry (x ≡ 1) to ``data`` by maximum likelihood.

    Parameters
    ----------
    data : PreferenceData
        Comparisons; their contexts are ignored.
    ridge : float, default 0
        λ of the penalty (λ/2)‖θ‖²; needed where an item wins or loses every comparison it is in
        (the MLE does not exist then), as in :func:`~bayes_loco.fit_mle`.
    ties : {"half", "davidson"}, default "half"
        How tied labels (½) enter, as in :func:`~bayes_loco.fit_mle`.

    Returns
    -------
    BradleyTerryFit
    """
    return BradleyTerryFit(fit_mle(one_context(data), ridge=ridge, ties=ties))
