"""The contextual BTL model: margins, rewards, likelihood and its derivatives."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import approx_fprime

from bayes_loco import model
from bayes_loco.model import expected_label, outcome_probabilities


def _random(seed=0, n=50, d_x=4, d_phi=6, scale=1.0):
    rng = np.random.default_rng(seed)
    return (scale * rng.standard_normal((d_x, d_phi)), rng.standard_normal((n, d_x)),
            rng.standard_normal((n, d_phi)), rng.integers(0, 2, size=n))


@pytest.mark.parametrize(("seed", "block_rows"), [(0, None), (1, None), (2, 7)])
def test_margins_equal_kronecker_computation(seed, block_rows, kron, monkeypatch):
    theta, x, d, _ = _random(seed)
    if block_rows:  # XΘ a block of 7 rows at a time, a ragged last one
        monkeypatch.setattr(model, "MARGIN_BLOCK_BYTES", 8 * theta.shape[1] * block_rows)
    eta = model.margins(theta, x, d)
    # ⟨vec(x Δφᵀ), vec Θ⟩ with the explicit Kronecker design, row-major vec
    np.testing.assert_allclose(eta, kron(x, d) @ theta.ravel(), rtol=1e-12, atol=1e-12)
    # and the plain double sum
    np.testing.assert_allclose(eta, [xt @ theta @ dt for xt, dt in zip(x, d, strict=True)], rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_rewards_equal_kronecker_computation(seed, kron):
    rng = np.random.default_rng(seed)
    theta = rng.standard_normal((3, 5))
    x = rng.standard_normal((7, 3))
    feats = rng.standard_normal((7, 4, 5))
    r = model.rewards(theta, x, feats)
    assert r.shape == (7, 4)
    for a in range(4):
        np.testing.assert_allclose(r[:, a], kron(x, feats[:, a]) @ theta.ravel(), rtol=1e-12, atol=1e-12)
    # linear in Θ and a difference of rewards is the margin of the difference of features
    np.testing.assert_allclose(r[:, 2] - r[:, 0], model.margins(theta, x, feats[:, 2] - feats[:, 0]),
                               rtol=1e-12, atol=1e-12)


def test_neg_log_likelihood_direct_formula():
    theta, x, d, y = _random(3)
    eta = model.margins(theta, x, d)
    p = 1.0 / (1.0 + np.exp(-eta))
    direct = -np.sum(y * np.log(p) + (1 - y) * np.log(1 - p))
    assert model.neg_log_likelihood(eta, y) == pytest.approx(direct, rel=1e-12)
    # Bernoulli likelihood of y = 1 at η equals that of y = 0 at −η
    assert model.neg_log_likelihood(eta, y) == pytest.approx(model.neg_log_likelihood(-eta, 1 - y),
                                                             rel=1e-13)
    assert model.neg_log_likelihood(np.zeros(10), np.ones(10)) == pytest.approx(10 * np.log(2), rel=1e-14)


def test_neg_log_likelihood_is_stable_at_extreme_margins():
    eta = np.array([800.0, -800.0, 800.0, -800.0])
    y = np.array([1, 0, 0, 1])
    # −log σ(800) ≈ e^{−800} underflows to 0; −log σ(−800) = 800 + log(1 + e^{−800}) = 800
    value = model.neg_log_likelihood(eta, y)
    assert np.isfinite(value)
    assert value == pytest.approx(1600.0, rel=1e-14)
    assert model.neg_log_likelihood(eta[:2], y[:2]) == pytest.approx(0.0, abs=1e-300)


def test_residuals_and_fisher_weights():
    eta = np.array([-3.0, 0.0, 0.7, 40.0, -800.0])
    y = np.array([1, 0, 1, 0, 0])
    p = np.array([1 / (1 + np.exp(3.0)), 0.5, 1 / (1 + np.exp(-0.7)), 1.0, 0.0])
    np.testing.assert_allclose(model.residuals(eta, y), p - y, rtol=1e-12, atol=1e-300)
    w = model.fisher_weights(eta)
    np.testing.assert_allclose(w[:3], p[:3] * (1 - p[:3]), rtol=1e-12)
    assert np.all(w >= 0) and np.all(np.isfinite(w))
    # p(1 − p) is the derivative of the residual in η
    h = 1e-6
    fd = (model.residuals(eta[:3] + h, y[:3]) - model.residuals(eta[:3] - h, y[:3])) / (2 * h)
    np.testing.assert_allclose(w[:3], fd, rtol=1e-7)


@pytest.mark.parametrize("weights_on_contexts", [False, True])
def test_score_matrix_equals_weighted_sum_of_outer_products(kron, weights_on_contexts, monkeypatch):
    _, x, d, _ = _random(4)
    if weights_on_contexts:  # the large-ΔΦ route
        monkeypatch.setattr(model, "MARGIN_BLOCK_BYTES", d.nbytes - 1)
    w = np.random.default_rng(5).standard_normal(x.shape[0])
    expected = sum(wt * np.outer(xt, dt) for wt, xt, dt in zip(w, x, d, strict=True))
    np.testing.assert_allclose(model.score_matrix(w, x, d), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(model.score_matrix(w, x, d).ravel(), kron(x, d).T @ w, rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nll_and_gradient_matches_finite_differences(seed):
    theta, x, d, y = _random(seed, n=200, scale=0.5)
    value, grad = model.nll_and_gradient(theta, x, d, y)
    assert value == pytest.approx(model.neg_log_likelihood(model.margins(theta, x, d), y), rel=1e-14)
    assert grad.shape == theta.shape

    def f(flat):
        return model.neg_log_likelihood(model.margins(flat.reshape(theta.shape), x, d), y)

    # central differences: error O(h²·f''') ≈ 1e-10 relative at h = 1e-5
    h = 1e-5
    fd = np.zeros(theta.size)
    for i in range(theta.size):
        e = np.zeros(theta.size)
        e[i] = h
        fd[i] = (f(theta.ravel() + e) - f(theta.ravel() - e)) / (2 * h)
    np.testing.assert_allclose(grad.ravel(), fd, rtol=1e-6, atol=1e-6 * np.abs(fd).max())
    # scipy's forward differences as a second, independent reference
    fwd = approx_fprime(theta.ravel(), f, 1e-7)
    assert np.linalg.norm(grad.ravel() - fwd) <= 1e-4 * np.linalg.norm(fwd)


def test_gradient_at_zero_flips_with_the_labels():
    # at Θ = 0 the gradient is Σ (½ − y_t) x_t Δφ_tᵀ: flipping all labels flips its sign
    _, x, d, y = _random(6, n=100)
    g = model.nll_and_gradient(np.zeros((4, 6)), x, d, y)[1]
    g_flip = model.nll_and_gradient(np.zeros((4, 6)), x, d, 1 - y)[1]
    np.testing.assert_allclose(g, -g_flip, rtol=1e-12, atol=1e-12)
    assert np.abs(g).max() > 1.0


def test_fisher_information_is_the_logit_hessian_of_statsmodels():
    import statsmodels.api as sm

    rng = np.random.default_rng(5)
    z, beta = rng.standard_normal((80, 5)), rng.standard_normal(5)
    y = (rng.random(80) < 0.5).astype(float)
    np.testing.assert_allclose(model.fisher_information(z, z @ beta), -sm.Logit(y, z).hessian(beta),
                               rtol=1e-10, atol=1e-12)


def test_outcome_probabilities_follow_davidson_and_reduce_to_bradley_terry():
    eta = np.array([-40.0, -1.3, 0.0, 0.7, 40.0])
    bt = outcome_probabilities(eta)
    np.testing.assert_allclose(bt[:, 2], 1 / (1 + np.exp(-eta)), rtol=1e-12)
    np.testing.assert_array_equal(bt[:, 1], 0)
    np.testing.assert_allclose(outcome_probabilities(eta, 0.0), bt, atol=1e-15)
    nu = 0.8
    win, lose = np.exp(eta / 2), np.exp(-eta / 2)  # Davidson's π_1^{1/2} π_0^{-1/2} form, direct
    total = win + lose + nu
    expected = np.stack([lose / total, nu / total, win / total], axis=1)
    np.testing.assert_allclose(outcome_probabilities(eta, nu), expected, rtol=1e-12)
    np.testing.assert_allclose(expected_label(eta, nu), (win + nu / 2) / total, rtol=1e-12)
    np.testing.assert_allclose(expected_label(eta), bt[:, 2], rtol=1e-15)
