"""The contextual Bradley–Terry–Luce model with a bilinear reward.

r(x, s, a) = xᵀ Θ φ(s, a) and P(y = 1) = σ(xᵀ Θ Δφ). Every function here works
with GEMMs on X (N × d_x) and ΔΦ (N × d_φ) and never forms the N × d_x·d_φ
Kronecker design (docs/design.md, convention 7).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, log_expit, softmax

# XΘ (N × d_φ) is formed at most this many bytes at a time.
MARGIN_BLOCK_BYTES = 2**27


def margins(theta: np.ndarray, contexts: np.ndarray, differences: np.ndarray) -> np.ndarray:
    """Linear predictors η_t = x_tᵀ Θ Δφ_t as a row-wise dot of XΘ with ΔΦ.

    XΘ has ΔΦ's size; above :data:`MARGIN_BLOCK_BYTES` it is formed a block of rows at a
    time (at N = 100,000 and d_φ = 4096 it would be 3.3 GB).
    """
    n = contexts.shape[0]
    rows = max(1, MARGIN_BLOCK_BYTES // (8 * max(1, theta.shape[1])))
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


def neg_log_likelihood(eta: np.ndarray, labels: np.ndarray) -> float:
    """Σ_t −log P(y_t | η_t) for the Bernoulli-logit likelihood, computed stably."""
    signed = np.where(labels == 1, eta, -eta)
    return float(-log_expit(signed).sum())


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


def residuals(eta: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """∂NLL/∂η_t = σ(η_t) − y_t."""
    return expit(eta) - labels


def score_matrix(weights: np.ndarray, contexts: np.ndarray, differences: np.ndarray) -> np.ndarray:
    """Σ_t w_t x_t Δφ_tᵀ = Xᵀ diag(w) ΔΦ, the gradient of Σ_t f(η_t) for w_t = f'(η_t).

    Above :data:`MARGIN_BLOCK_BYTES` of ΔΦ the weights go on X instead, so that no copy of
    ΔΦ is made (the same sum, rounded differently).
    """
    if differences.nbytes > MARGIN_BLOCK_BYTES:
        return (weights[:, None] * contexts).T @ differences
    return contexts.T @ (weights[:, None] * differences)


def nll_and_gradient(theta: np.ndarray, contexts: np.ndarray, differences: np.ndarray,
                     labels: np.ndarray) -> tuple[float, np.ndarray]:
    """Negative log-likelihood of Θ and its gradient (d_x × d_φ)."""
    eta = margins(theta, contexts, differences)
    return (neg_log_likelihood(eta, labels),
            score_matrix(residuals(eta, labels), contexts, differences))


def fisher_weights(eta: np.ndarray) -> np.ndarray:
    """p(1 − p) at η: the Bernoulli-logit curvature, the weights of the Fisher information."""
    p = expit(eta)
    return p * (1.0 - p)


def fisher_information(design: np.ndarray, eta: np.ndarray) -> np.ndarray:
    """Σ_t p_t(1 − p_t) z_t z_tᵀ: the Fisher information of a linear logit with rows z_t of ``design``."""
    return design.T @ (fisher_weights(eta)[:, None] * design)
