"""The contextual Bradley–Terry–Luce model with a bilinear reward.

r(x, s, a) = xᵀ Θ φ(s, a) and P(y = 1) = σ(xᵀ Θ Δφ). Every function here works
with GEMMs on X (N × d_x) and ΔΦ (N × d_φ) and never forms the N × d_x·d_φ
Kronecker design (docs/design.md, convention 7).

A tie (y = ½) is read one of two ways (:class:`Likelihood`, a fit's ``ties=``): half a
win each way (a quasi-likelihood, whose Wald set is the sandwich's) or Davidson's
model with a tie parameter ν (:func:`outcome_probabilities`); weights w_t multiply
each comparison's term (:func:`wald_precision` says what each does to the Wald set).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.special import expit, log_expit, logsumexp, softmax

from ._validation import check_option
from .config import get_config
from .design import gram_rows
from .indexed import ItemDifferences
from .linalg import sandwich_precision


def margins(theta: np.ndarray, contexts: np.ndarray, differences) -> np.ndarray:
    """Linear predictors η_t = x_tᵀ Θ Δφ_t as a row-wise dot of XΘ with ΔΦ.

    XΘ has ΔΦ's size; above ``config["margin_block_bytes"]`` it is formed a block of rows at a
    time (at N = 100,000 and d_φ = 4096 it would be 3.3 GB). ``differences`` may be an
    :class:`~bayes_loco.indexed.ItemDifferences` (a data set's ``delta``): then a gather of
    ΘΦᵀ, O(N d_x + A d_φ d_x).
    """
    if isinstance(differences, ItemDifferences):
        return differences.margins(theta, contexts)
    n = contexts.shape[0]
    rows = max(1, get_config()["margin_block_bytes"] // (8 * max(1, theta.shape[1])))
    if rows >= n:
        return np.einsum("ij,ij->i", contexts @ theta, differences)
    return np.concatenate([np.einsum("ij,ij->i", contexts[lo: lo + rows] @ theta, differences[lo: lo + rows])
                           for lo in range(0, n, rows)])


def rewards(theta: np.ndarray, contexts: np.ndarray, features: np.ndarray) -> np.ndarray:
    """Rewards r(x_i, s_i, a) = x_iᵀ Θ φ(s_i, a) of every candidate action.

    Parameters
    ----------
    theta : ndarray, shape (d_x, d_φ)
    contexts : ndarray, shape (n, d_x)
    features : ndarray, shape (n, A, d_φ)
        φ(s_i, a) for the A candidate actions of row i.

    Returns
    -------
    ndarray, shape (n, A)
    """
    return np.einsum("ik,iak->ia", contexts @ theta, features)


def neg_log_likelihood(eta: np.ndarray, labels: np.ndarray, weights: np.ndarray | None = None) -> float:
    """Σ_t w_t ℓ_t, ℓ_t = −[y_t log σ(η_t) + (1 − y_t) log σ(−η_t)], computed stably.

    For y_t ∈ {0, 1} this is −log P(y_t | η_t) of the Bernoulli-logit model; a tie y_t = ½
    counts half a win each way (arena-rank's convention), which makes the sum a
    quasi-likelihood. ``weights`` None means w_t = 1.
    """
    if has_ties(labels):
        terms = labels * log_expit(eta) + (1 - labels) * log_expit(-eta)
    else:
        terms = log_expit(np.where(labels == 1, eta, -eta))
    if weights is None:
        return float(-terms.sum())
    return float(-(weights * terms).sum())


def has_ties(labels: np.ndarray) -> bool:
    """True when some label is ½ (only float labels can hold one)."""
    return labels.dtype.kind == "f" and bool((labels == 0.5).any())


def outcome_probabilities(eta: np.ndarray, nu: float | None = None) -> np.ndarray:
    """P(y_t = 0), P(tie), P(y_t = 1) of each comparison, shape (N, 3).

    ``nu`` None is the Bradley–Terry model (no tie: (1 − σ(η), 0, σ(η))); ``nu`` = ν ≥ 0 is
    Davidson's (1970) model, P(y = 1) : P(tie) : P(y = 0) = e^{η/2} : ν : e^{−η/2}.
    """
    eta = np.asarray(eta, dtype=float)
    if nu is None:
        p = expit(eta)
        return np.stack([1 - p, np.zeros_like(p), p], axis=-1)
    with np.errstate(divide="ignore"):
        log_nu = np.log(nu)
    logits = np.stack([-eta / 2, np.full_like(eta, log_nu), eta / 2], axis=-1)
    return softmax(logits, axis=-1)


def expected_label(eta: np.ndarray, nu: float | None = None) -> np.ndarray:
    """E[y_t] = P(y_t = 1) + ½ P(tie): the probability that a_t1 is preferred, a tie counting half."""
    probs = outcome_probabilities(eta, nu)
    return probs[..., 2] + 0.5 * probs[..., 1]


#: How every fit reads a tie (its ``ties=`` argument, frequentist and Bayesian alike): half a win
#: each way, or Davidson's model with a tie parameter ν.
HALF = "half"
DAVIDSON = "davidson"
TIE_MODELS = (HALF, DAVIDSON)
Ties = Literal["half", "davidson"]


def check_ties(ties) -> str:
    """``ties`` if it names a tie model of :data:`TIE_MODELS`, or one error naming the argument.

    >>> bl.model.check_ties("davidson")
    'davidson'
    """
    return check_option(ties, "ties", TIE_MODELS)


@dataclass(frozen=True, eq=False)
class Likelihood:
    """The loss Σ_t w_t ℓ_t that a frequentist fit minimises, and its derivatives in η_t and λ = log ν.

    ``ties="half"``: ℓ_t of :func:`neg_log_likelihood` (a tie half a win each way).
    ``ties="davidson"``: ℓ_t = −log P(y_t | η_t, ν) in Davidson's model
    (:func:`outcome_probabilities`), with one more parameter λ = log ν, fitted jointly;
    in (η/2, λ) it is an exponential family with statistics (2y − 1, [y = ½]), so ℓ_t is
    convex in (η_t, λ) and its curvature is their covariance.

    Attributes
    ----------
    labels : ndarray, shape (N,)
        y_t ∈ {0, ½, 1}.
    weights : ndarray, shape (N,), or None
        w_t; None means all 1 (and then every sum is computed as before weights existed).
    ties : {"half", "davidson"}
    """

    labels: np.ndarray
    weights: np.ndarray | None = None
    ties: str = "half"
    counts: np.ndarray | None = None

    @classmethod
    def of(cls, data, ties: str = "half") -> Likelihood:
        """The loss of ``data`` (a :class:`~bayes_loco.PreferenceData`); unit weights count as none."""
        return cls(data.labels, data.weights if data.weighted else None, ties, data.counts)

    @property
    def total_weight(self) -> float:
        """Σ_t f_t w_t: the number of comparisons, weighted (what the mean loss divides by)."""
        if self.weights is None and self.counts is None:
            return float(self.labels.shape[0])
        return float(self._weighted(np.ones(self.labels.shape[0])).sum())

    def meat_weights(self, derivative: np.ndarray) -> np.ndarray:
        """The sandwich's per-row weights from f_t w_t ∂ℓ_t: f_t w_t² (∂ℓ_t)², the sum over the expanded
        rows (HC0 with ``var_weights``; with ``freq_weights`` each copy counts once)."""
        squared = derivative**2
        return squared if self.counts is None else squared / np.where(self.counts > 0, self.counts, 1.0)

    @property
    def n_extra(self) -> int:
        """Parameters besides θ: λ = log ν for Davidson's model, none for "half"."""
        return int(self.ties == "davidson")

    @property
    def quasi(self) -> bool:
        """True when Σ_t w_t ℓ_t is not a log-likelihood (half ties, or weights other than 1): the Wald set
        then needs the sandwich. Weights are read as sampling weights (statsmodels' ``var_weights``)."""
        return self.weights is not None or (self.ties == "half" and has_ties(self.labels))

    def rows(self, lo: int, hi: int) -> Likelihood:
        """The loss of comparisons lo … hi − 1."""
        weights = None if self.weights is None else self.weights[lo:hi]
        counts = None if self.counts is None else self.counts[lo:hi]
        return Likelihood(self.labels[lo:hi], weights, self.ties, counts)

    @property
    def multiplier(self) -> np.ndarray | None:
        """f_t w_t, or None when every row counts once."""
        if self.counts is None:
            return self.weights
        return self.counts if self.weights is None else self.counts * self.weights

    def _weighted(self, values: np.ndarray) -> np.ndarray:
        multiplier = self.multiplier
        return values if multiplier is None else multiplier * values

    def _davidson(self, eta: np.ndarray, log_nu: float) -> tuple[np.ndarray, np.ndarray]:
        """log P(y_t | η_t, ν) and (P(y = 0), P(tie), P(y = 1)) of each comparison."""
        logits = np.stack([-eta / 2, np.full_like(eta, log_nu), eta / 2], axis=-1)
        log_probs = logits - logsumexp(logits, axis=-1, keepdims=True)
        observed = np.take_along_axis(log_probs, (2 * self.labels).astype(np.intp)[:, None], axis=-1)[:, 0]
        return observed, np.exp(log_probs)

    def value(self, eta: np.ndarray, log_nu: float | None = None) -> float:
        """Σ_t w_t ℓ_t at margins η (and λ = ``log_nu`` for Davidson's model)."""
        if self.ties == "half":
            return neg_log_likelihood(eta, self.labels, self.multiplier)
        return float(-self._weighted(self._davidson(eta, log_nu)[0]).sum())

    def derivatives(self, eta: np.ndarray, log_nu: float | None = None
                    ) -> tuple[float, np.ndarray, np.ndarray | None]:
        """The loss, w_t ∂ℓ_t/∂η_t and w_t ∂ℓ_t/∂λ of each comparison (the last None for "half")."""
        if self.ties == "half":
            return self.value(eta), residuals(eta, self.labels, self.multiplier), None
        observed, probs = self._davidson(eta, log_nu)
        d_eta = 0.5 * (probs[:, 2] - probs[:, 0]) - (self.labels - 0.5)
        d_log_nu = probs[:, 1] - (self.labels == 0.5)
        return float(-self._weighted(observed).sum()), self._weighted(d_eta), self._weighted(d_log_nu)

    def curvature(self, eta: np.ndarray, log_nu: float | None = None
                  ) -> tuple[np.ndarray, np.ndarray | None, float]:
        """w_t ∂²ℓ_t/∂η_t², w_t ∂²ℓ_t/∂η_t∂λ (None for "half") and Σ_t w_t ∂²ℓ_t/∂λ² (0 for "half").

        Neither depends on the labels: for Davidson's model they are ¼ Var(2y − 1),
        ½ Cov(2y − 1, [tie]) = −½ (P₁ − P₀) P_tie and Var([tie]) under the model.
        """
        if self.ties == "half":
            return fisher_weights(eta, self.multiplier), None, 0.0
        probs = self._davidson(eta, log_nu)[1]
        p0, tie, p1 = probs[:, 0], probs[:, 1], probs[:, 2]
        c_eta = 0.25 * (p1 + p0 - (p1 - p0) ** 2)
        c_cross = -0.5 * (p1 - p0) * tie
        return self._weighted(c_eta), self._weighted(c_cross), float(self._weighted(tie * (1 - tie)).sum())


def residuals(eta: np.ndarray, labels: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """∂NLL/∂η_t = w_t (σ(η_t) − y_t)."""
    res = expit(eta) - labels
    return res if weights is None else weights * res


def score_matrix(weights: np.ndarray, contexts: np.ndarray, differences) -> np.ndarray:
    """Σ_t w_t x_t Δφ_tᵀ = Xᵀ diag(w) ΔΦ, the gradient of Σ_t f(η_t) for w_t = f'(η_t).

    Above ``config["margin_block_bytes"]`` of ΔΦ the weights go on X instead, so that no copy of
    ΔΦ is made (the same sum, rounded differently). An
    :class:`~bayes_loco.indexed.ItemDifferences` ΔΦ sums by item (``np.bincount``), then GΦ.
    """
    if isinstance(differences, ItemDifferences):
        return differences.score(weights, contexts)
    if differences.nbytes > get_config()["margin_block_bytes"]:
        return (weights[:, None] * contexts).T @ differences
    return contexts.T @ (weights[:, None] * differences)


def nll_and_gradient(theta: np.ndarray, contexts: np.ndarray, differences: np.ndarray,
                     labels: np.ndarray) -> tuple[float, np.ndarray]:
    """Negative log-likelihood of Θ and its gradient (d_x × d_φ)."""
    eta = margins(theta, contexts, differences)
    return (neg_log_likelihood(eta, labels),
            score_matrix(residuals(eta, labels), contexts, differences))


def fisher_weights(eta: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """w_t p_t(1 − p_t) at η: the Bernoulli-logit curvature, the weights of the Fisher information."""
    p = expit(eta)
    curvature = p * (1.0 - p)
    return curvature if weights is None else weights * curvature


def fisher_information(design: np.ndarray, eta: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Σ_t w_t p_t(1 − p_t) z_t z_tᵀ: the Fisher information of a linear logit with rows z_t of
    ``design``, each row's term times ``weights`` (a row's count times its sampling weight) if given."""
    return gram_rows(design, fisher_weights(eta, weights))


# The covariances a frequentist fit's Wald set can use (statsmodels' names: "nonrobust" is "model").
COV_TYPES = ("model", "sandwich")


def resolve_cov_type(likelihood: Likelihood, cov_type: str | None) -> str:
    """``cov_type``, or its default: ``"sandwich"`` where the loss is a quasi-likelihood (half ties,
    sampling weights), ``"model"`` otherwise (counts included: they are the likelihood's own)."""
    if cov_type is None:
        return "sandwich" if likelihood.quasi else "model"
    if cov_type not in COV_TYPES:
        raise ValueError(f"cov_type must be one of {COV_TYPES} or None (the default), got {cov_type!r}")
    return cov_type


def wald_precision(likelihood: Likelihood, eta: np.ndarray, log_nu: float | None,
                   gram: Callable[[np.ndarray], np.ndarray],
                   score: Callable[[np.ndarray], np.ndarray], cov_type: str | None = None) -> np.ndarray:
    """The precision (inverse covariance) of θ̂ that a Wald set uses, k × k, at the estimate's margins η.

    ``gram(c)`` is Σ_t c_t z_t z_tᵀ and ``score(g)`` is Σ_t g_t z_t, z_t the comparisons'
    rows in the fit's coordinates.

    - "half" without ties or weights (a log-likelihood): the Fisher information
      H = Σ_t p_t(1 − p_t) z_t z_tᵀ, computed exactly as before ties existed.
    - "half" with ties or weights (a quasi-likelihood): the inverse H J⁺ H of the sandwich
      covariance H⁻¹ J H⁻¹, with H = Σ_t w_t p_t(1 − p_t) z_t z_tᵀ and
      J = Σ_t w_t² (y_t − p_t)² z_t z_tᵀ (statsmodels' HC0).
    - Davidson's model: the information of (θ, λ = log ν) — or, with weights, its
      sandwich — and then the precision of θ with λ profiled out: the inverse of the θ-block
      of the joint inverse, i.e. the Schur complement I_θθ − I_θλ I_λλ⁻¹ I_λθ.

    ``cov_type`` chooses between the two whatever the loss (:func:`resolve_cov_type`; None is
    the default above): ``"model"`` is the information H alone (statsmodels' ``nonrobust``: with
    half ties, the GLM's model-based errors for fractional y), ``"sandwich"`` is H J⁺ H (HC0).
    Counts f_t (frequency weights) enter both as copies of their row: J sums f_t w_t² (∂ℓ_t)².
    """
    robust = resolve_cov_type(likelihood, cov_type) == "sandwich"
    if likelihood.ties == "half":
        bread = gram(likelihood.curvature(eta)[0])
        if not robust:
            return bread
        return sandwich_precision(bread, gram(likelihood.meat_weights(likelihood.derivatives(eta)[1])))
    c_eta, c_cross, c_nu = likelihood.curvature(eta, log_nu)
    joint = _bordered(gram(c_eta), score(c_cross), c_nu)
    if robust:
        _, d_eta, d_nu = likelihood.derivatives(eta, log_nu)
        counts = likelihood.counts
        per_row = 1.0 if counts is None else np.where(counts > 0, counts, 1.0)
        meat = _bordered(gram(d_eta**2 / per_row), score(d_eta * d_nu / per_row),
                         float(d_nu @ (d_nu / per_row)))
        joint = sandwich_precision(joint, meat)
    cross, corner = joint[:-1, -1], joint[-1, -1]
    return joint[:-1, :-1] - np.outer(cross, cross) / corner


def _bordered(block: np.ndarray, border: np.ndarray, corner: float) -> np.ndarray:
    """[[block, border], [borderᵀ, corner]]: a (θ, λ) matrix from its θ-block, cross terms and λ entry."""
    return np.block([[block, border[:, None]], [border[None, :], np.array([[corner]])]])
