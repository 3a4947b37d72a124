"""The chart's preconditioners: the curvature of the log posterior at the start, whitened.

:func:`~bayes_loco.bayes.chart.chart_frame` samples the charted coordinates c = (A, C, B) as
c₀ + L⁻ᵀ z with L Lᵀ the curvature at the start (:func:`whitening`), and a partial chart's weak
block in whitened coordinates too (:func:`weak_whitening`); :mod:`.chart`'s docstring says why.
:func:`chart_start` is the start Θ̂ in those coordinates.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import cho_factor, rq
from scipy.linalg import solve_triangular as np_solve_triangular

from ..config import get_config
from ..data import PreferenceData
from ..model import fisher_information, margins
from . import dims as D


def weak_whitening(frame, data: PreferenceData, theta0, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """(S_k per weak column k of M, M_W): the weak block's whitening (:mod:`.chart`'s docstring).

    With x̃_t, δ̃_t the comparisons in the frame's trailing coordinates and the start's W = Z =
    [diag(σ̂)^½; 0], the Fisher information of W_k is σ̂_k Σ_t w_t δ̃_tk² x̃_t x̃_tᵀ (w_t = p_t(1 − p_t)
    times the row's count and sampling weight).
    M_W, shared by W's columns (their average curvature plus the prior's I/s²), is lower triangular.
    At that start rotated into the gauge (:func:`weak_gauge`), W Zᵀ = Q Mᵀ with Q = W L⁻ᵀ, so the
    Fisher information of M_k is Σ_t w_t (x̃_tᵀ q_k)² δ̃_t δ̃_tᵀ, and ‖Z‖² = tr(M (LᵀL)⁻¹ Mᵀ) adds
    ((LᵀL)⁻¹)_kk / s²; S_k = L_k⁻ᵀ for H_k = L_k L_kᵀ their sum. Where V's weak columns are Z itself
    (``frame.weak_product`` False), w_k takes q_k's place and the prior adds 1 / s².
    """
    r1 = frame.chart_rank
    sv = frame.singular_values[r1:]
    dx, m = frame.left.shape[1] - r1, frame.right.shape[1] - r1
    left_info = np.zeros((dx, dx))
    for xt, dt, eta, weights in _trailing_blocks(frame, data, r1, theta0):
        for k, s_k in enumerate(sv):
            left_info += fisher_information(np.sqrt(s_k) * dt[:, [k]] * xt, eta, weights)
    # H = U Uᵀ with U upper triangular (Cholesky with the axes reversed), M_W = U⁻ᵀ.
    precision = left_info / sv.size + np.eye(dx) / scale**2
    upper = np.linalg.cholesky(precision[::-1, ::-1])[::-1, ::-1]
    left = np_solve_triangular(upper.T, np.eye(dx), lower=True)
    w0 = np.zeros((dx, sv.size))
    w0[: sv.size] = np.diag(np.sqrt(sv))
    w0 = w0 @ weak_gauge(np_solve_triangular(left, w0, lower=True)).T
    through, prior = w0, np.full(sv.size, 1.0 / scale**2)  # Z_k, seen through W's column k
    if frame.weak_product:  # M_k, seen through Q's: Z = M L⁻¹
        chol = np.linalg.cholesky(w0.T @ w0)
        through = np_solve_triangular(chol, w0.T, lower=True).T
        prior = np.diag(np.linalg.inv(chol.T @ chol)) / scale**2
    # A second pass over the comparisons (the gauge needs M_W from the first), block by block as the first:
    # keeping the first pass's blocks would hold all N rows at once.
    right_info = np.zeros((sv.size, m, m))
    for xt, dt, eta, weights in _trailing_blocks(frame, data, r1, theta0):
        for k in range(sv.size):
            right_info[k] += fisher_information((xt @ through[:, [k]]) * dt, eta, weights)
    right = np.stack([inverse_cholesky_t(info + prior[k] * np.eye(m)) for k, info in enumerate(right_info)])
    return right, left


def _blocks(data: PreferenceData):
    """(x, δφ, f w) of each block of ``config["chunk"]`` comparisons: f w each row's count times its
    sampling weight, what its log-likelihood term is multiplied by, and so its curvature."""
    chunk, weights = get_config()["chunk"], data.loss_weights
    for lo in range(0, data.n, chunk):
        yield data.contexts[lo:lo + chunk], data.differences[lo:lo + chunk], weights[lo:lo + chunk]


def _trailing_blocks(frame, data: PreferenceData, r1: int, theta0):
    """(x̃, δ̃, η, f w) of each of :func:`_blocks`: contexts and differences in the frame's trailing
    coordinates, margins at ``theta0``, the rows' weights."""
    for x, dphi, weights in _blocks(data):
        yield x @ frame.left[:, r1:], dphi @ frame.right[:, r1:], margins(theta0, x, dphi), weights


def weak_gauge(w_t: np.ndarray) -> np.ndarray:
    """The rotation R (det R = 1) with W̃ Rᵀ's top r_w rows upper triangular, their diagonal positive
    after the first entry, which carries the sign (the partial chart's gauge, :mod:`.chart`)."""
    rw = w_t.shape[1]
    if rw == 1:
        return np.eye(1)
    top, rot = rq(w_t[:rw])
    signs = np.where(np.diag(top) < 0, -1.0, 1.0)
    signs[0] = 1.0
    signs[0] = np.sign(np.linalg.det(signs[:, None] * rot))
    return signs[:, None] * rot


def inverse_cholesky_t(curvature: np.ndarray) -> np.ndarray:
    """L⁻ᵀ for the Cholesky factor L Lᵀ = ``curvature``: x = L⁻ᵀ z has covariance ``curvature``⁻¹."""
    chol = np.tril(cho_factor(curvature, lower=True)[0])
    return np_solve_triangular(chol.T, np.eye(curvature.shape[0]), lower=False)


def whitening(left, right, sv, theta0, data: PreferenceData, scale: float) -> np.ndarray:
    """L⁻ᵀ for the chart of the leading ``sv.size`` components: L Lᵀ the curvature at Θ̂ (``theta0``)."""
    curvature = chart_information(left, right, sv, theta0, data)
    curvature += np.diag(prior_curvature(left, right, sv, scale))
    return inverse_cholesky_t(curvature)


def jacobian_rows(left, right, sv, x: np.ndarray, dphi: np.ndarray) -> np.ndarray:
    """∂η_t/∂c at c₀ for a block of comparisons: rows (x₁ ⊗ δ₁, x₁ ⊗ δ₂, x₂ ⊗ σ̂δ₁)."""
    r = sv.size
    xt, dt = x @ left, dphi @ right
    x1, x2, d1, d2 = xt[:, :r], xt[:, r:], dt[:, :r], dt[:, r:]
    n = x.shape[0]
    return np.hstack([np.einsum("ti,tj->tij", x1, d1).reshape(n, -1),
                      np.einsum("ti,tj->tij", x1, d2).reshape(n, -1),
                      np.einsum("ti,tj->tij", x2, d1 * sv).reshape(n, -1)])


def chart_information(left, right, sv, theta0, data: PreferenceData) -> np.ndarray:
    """Σ_t f_t w_t p_t(1 − p_t) j_t j_tᵀ at c₀, j_t = ∂η_t/∂c (f_t w_t a row's count times its sampling
    weight), in blocks of ``config["chunk"]`` rows.

    ``left``, ``right``, ``sv``: P, Q and the charted σ̂ of the frame being built; ``theta0``: Θ̂
    projected on the spans, where the weights p_t(1 − p_t) are taken.
    """
    r = sv.size
    k_c = r * (left.shape[1] + right.shape[1] - r)
    info = np.zeros((k_c, k_c))
    for x, dphi, weights in _blocks(data):
        info += fisher_information(jacobian_rows(left, right, sv, x, dphi), margins(theta0, x, dphi), weights)
    return info


def prior_curvature(left, right, sv, scale: float) -> np.ndarray:
    """The diagonal of −∇² log prior in c at T = diag(σ̂)^½: rows i of [A, C] 1/(σ̂_i s²), B_·j σ̂_j/s²."""
    r, m, dx = sv.size, right.shape[1], left.shape[1]
    diagonal = np.concatenate([np.repeat(1.0 / sv, r), np.repeat(1.0 / sv, m - r), np.tile(sv, dx - r)])
    return diagonal / scale**2


def chart_start(frame, jitter: float, rng: np.random.Generator, scale: float = 1.0) -> dict:
    """A start for :func:`~.chart.build_chart_model` in ``frame`` (a ChartFrame): the centre c₀ (the
    start's Θ̂ projected), T = diag(σ̂)^½.

    With a partial chart, W = Z = [diag(σ̂_(r₁+1) … σ̂_r)^½; 0] (the rest of Θ̂'s
    SVD) and Y = 0, jittered, then rotated into the gauge (W̃'s top block upper triangular
    when r_w ≥ 2; :func:`~.whitening.weak_gauge`) and mapped to M̃ and N_Y (Z̃ and Y where not
    ``frame.weak_product``). ``jitter`` is added
    to z (whose posterior sd is about 1) and, times ``scale``, to U_⊥, V_⊥, W, Z, Y
    and T's entries below its diagonal: nutpie refuses a start with a gradient entry
    exactly 0, which JAX's gradient at T's zero lower entries is.
    """
    r1, rw = frame.chart_rank, frame.weak_rank
    sv = frame.singular_values
    start = {D.CHART_Z: jitter * rng.standard_normal(frame.dim),
             D.CHART_LOG_DIAG: 0.5 * np.log(sv[:r1])}
    if rw:
        w, z = (jitter * scale * rng.standard_normal((basis.shape[1] - r1, rw))
                for basis in (frame.left, frame.right))
        w[:rw] += np.diag(np.sqrt(sv[r1:]))
        z[:rw] += np.diag(np.sqrt(sv[r1:]))
        y = jitter * scale * rng.standard_normal((r1, rw))
        w_t = np_solve_triangular(frame.weak_left_whitening, w, lower=True)  # W̃ = M_W⁻¹ W
        rot = weak_gauge(w_t)
        w_t, z, y = w_t @ rot.T, z @ rot.T, y @ rot.T
        if frame.weak_product:  # M = Z L, N_Y = Y L
            w = frame.weak_left_whitening @ w_t
            chol = np.linalg.cholesky(w.T @ w)
            z, y = z @ chol, y @ chol
        columns = zip(frame.weak_whitening, z.T, strict=True)
        start[D.CHART_WEAK_RIGHT] = np.stack(
            [np_solve_triangular(m_k, z_k, lower=False) for m_k, z_k in columns], axis=1)
        start[D.CHART_WEAK_TOP] = y
        if rw > 1:
            start[D.CHART_WEAK_LOG_DIAG] = np.log(np.diag(w_t[:rw])[1:])
            start[D.CHART_WEAK_FIRST] = w_t[0, 0]
            start[D.CHART_WEAK_UPPER] = w_t[:rw][np.triu_indices(rw, 1)]
            w_t = w_t[rw:]
        if w_t.size:
            start[D.CHART_WEAK_LEFT] = w_t
    for name, null in zip((D.LEFT_NULL, D.RIGHT_NULL), frame.nulls, strict=True):
        if null.shape[1]:
            start[name] = jitter * scale * rng.standard_normal((null.shape[1], frame.rank))
    if r1 > 1:  # drawn last, so that the other entries are what they were before T's were jittered
        start[D.CHART_LOWER] = jitter * scale * rng.standard_normal(r1 * (r1 - 1) // 2)
    return start
