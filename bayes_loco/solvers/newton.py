"""Newton's method on the smoothed minimax over the unit ball (docs/design.md, "The exact objective").

The reduced problem is min_(‖u‖ ≤ 1) V(u), V(u) = Σ_i w_i max_a (c_ia + g_iaᵀu); its max is smoothed to
F_μ(u) = μ Σ_i w_i logsumexp((c_i + g_i u)/μ) ≥ V(u), and :func:`smoothed_ball_minimum` finds the
minimiser of F_μ on the ball (Moré–Sorensen on the multiplier λ of ‖u‖ ≤ 1).
"""

from __future__ import annotations

import numpy as np
from scipy import linalg
from scipy.special import logsumexp, softmax


def _smoothed_values(c, g, weights, mu, u):
    s = (c + g @ u) / mu
    lse = logsumexp(s, axis=1)
    return mu * float(weights @ lse), softmax(s, axis=1)


def _newton(c, g, weights, mu, lam, u, max_iter):
    """Minimise F_μ(u) + (λ/2)‖u‖² by damped Newton; only mixed units add curvature.

    Returns the minimiser, its softmax policy and the Hessian there (for the λ search).
    """
    m = u.shape[0]
    value, probs = _smoothed_values(c, g, weights, mu, u)
    hess = None
    for _ in range(max_iter):
        grad = np.einsum("ua,uam->m", weights[:, None] * probs, g) + lam * u
        hess = _hessian(g, weights, probs, mu) + lam * np.eye(m)
        try:
            step = -linalg.solve(hess, grad, assume_a="pos")
        except (linalg.LinAlgError, ValueError):
            step = -linalg.lstsq(hess, grad)[0]
        decrement = -float(grad @ step)
        if decrement <= 1e-15 * max(1.0, abs(value)):
            break
        objective = value + 0.5 * lam * u @ u
        t = 1.0
        while t > 1e-10:
            trial = u + t * step
            trial_value, trial_probs = _smoothed_values(c, g, weights, mu, trial)
            if trial_value + 0.5 * lam * trial @ trial <= objective - 1e-4 * t * decrement:
                break
            t *= 0.5
        else:
            break
        u, value, probs = trial, trial_value, trial_probs
    return u, probs, hess


def _hessian(g, weights, probs, mu):
    """∇²F_μ = (1/μ) Σ_i w_i Cov_π_i(g_i·); units with a (numerically) pure π add nothing."""
    m = g.shape[-1]
    mixed = probs.max(axis=1) < 1.0 - 1e-12
    if not mixed.any():
        return np.zeros((m, m))
    p = weights[mixed, None] * probs[mixed]
    gm = g[mixed]
    gbar = np.einsum("ua,uam->um", probs[mixed], gm)
    a = (np.sqrt(p)[..., None] * gm).reshape(-1, m)
    b = np.sqrt(weights[mixed])[:, None] * gbar
    return (a.T @ a - b.T @ b) / mu


def smoothed_ball_minimum(c, g, weights, mu, u, lam, max_iter):
    """Minimise F_μ over ‖u‖ ≤ 1: find λ ≥ 0 with ‖u(λ)‖ = 1, or λ → 0 with u inside.

    Newton on φ(λ) = 1/‖u(λ)‖ − 1 (Moré–Sorensen): φ is nearly linear in λ and
    φ'(λ) = uᵀ(∇²F_μ + λI)⁻¹u / ‖u‖³, safeguarded by the bracket found so far.
    """
    if lam is None:
        _, probs = _smoothed_values(c, g, weights, mu, np.zeros_like(u))
        lam = max(float(np.linalg.norm(np.einsum("ua,uam->m", weights[:, None] * probs, g))), 1e-12)
    lo, hi = 0.0, np.inf  # λ with ‖u‖ > 1 (too small) and ‖u‖ < 1 (too large)
    # ‖u‖ = 1 to 1e-7 is plenty: the certificate rescales u into the ball, changing V by ~1e-7·‖∇V‖.
    for _ in range(25):
        u, probs, hess = _newton(c, g, weights, mu, lam, u, max_iter)
        norm = float(np.linalg.norm(u))
        if abs(norm - 1.0) <= 1e-7 or (norm < 1.0 and lam <= 1e-14):
            break
        if norm > 1.0:
            lo = lam
        else:
            hi = lam
        phi = 1.0 / norm - 1.0
        try:
            slope = float(u @ linalg.solve(hess, u, assume_a="pos")) / norm**3
        except (linalg.LinAlgError, ValueError):
            slope = 0.0
        new = lam - phi / slope if slope > 0 else np.nan
        if not lo < new < hi:
            new = 0.5 * (lo + hi) if np.isfinite(hi) else 2.0 * lam
        if abs(new - lam) <= 1e-13 * lam:
            break
        lam = new
    return u, lam, probs
