"""The contextual BTL model: margins, rewards, likelihood and its derivatives."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import approx_fprime

import bayes_loco as bl
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
        bl.set_config(margin_block_bytes=8 * theta.shape[1] * block_rows)
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
        bl.set_config(margin_block_bytes=d.nbytes - 1)
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


# ----------------------------------------------------------------------------- ties and weights


def test_neg_log_likelihood_reads_a_tie_as_half_a_win_each_way():
    eta = np.array([-2.0, 0.0, 0.3, 5.0])
    tie = np.full(4, 0.5)
    half = 0.5 * np.log1p(np.exp(-eta)) + 0.5 * np.log1p(np.exp(eta))  # ½ softplus(−η) + ½ softplus(η)
    assert model.neg_log_likelihood(eta, tie) == pytest.approx(half.sum(), rel=1e-13)
    assert model.neg_log_likelihood(np.zeros(3), np.full(3, 0.5)) == pytest.approx(3 * np.log(2), rel=1e-14)
    # Not a loss (the reading of labels == 1 before ties existed), and symmetric in η.
    assert model.neg_log_likelihood(eta, tie) != pytest.approx(model.neg_log_likelihood(eta, np.zeros(4)))
    assert model.neg_log_likelihood(eta, tie) == pytest.approx(model.neg_log_likelihood(-eta, tie), rel=1e-13)
    labels = np.array([1.0, 0.5, 0.0, 0.5])
    w = np.array([0.5, 2.0, 1.0, 3.0])
    terms = np.array([model.neg_log_likelihood(eta[i: i + 1], labels[i: i + 1]) for i in range(4)])
    assert model.neg_log_likelihood(eta, labels, w) == pytest.approx(w @ terms, rel=1e-13)
    np.testing.assert_allclose(model.residuals(eta, labels, w), w * (1 / (1 + np.exp(-eta)) - labels),
                               rtol=1e-13)
    p = 1 / (1 + np.exp(-eta))
    np.testing.assert_allclose(model.fisher_weights(eta, w), w * p * (1 - p), rtol=1e-13)


def _likelihoods():
    rng = np.random.default_rng(8)
    labels = rng.integers(0, 3, 40) / 2
    w = rng.uniform(0.3, 3.0, 40)
    likelihoods = [model.Likelihood(labels, w, "half"), model.Likelihood(labels, None, "davidson"),
                   model.Likelihood(labels, w, "davidson")]
    return rng.normal(0, 2, 40), likelihoods


@pytest.mark.parametrize("which", [0, 1, 2])
def test_likelihood_derivatives_and_curvature_match_finite_differences(which):
    eta, likelihoods = _likelihoods()
    lik = likelihoods[which]
    lam = np.log(0.7) if lik.ties == "davidson" else None
    w = np.ones(eta.size) if lik.weights is None else lik.weights
    if lik.ties == "davidson":  # −log P(y_t) with P from outcome_probabilities
        direct = -np.log(outcome_probabilities(eta, 0.7)[np.arange(eta.size), (2 * lik.labels).astype(int)])
        assert lik.value(eta, lam) == pytest.approx(w @ direct, rel=1e-12)
    value, d_eta, d_lam = lik.derivatives(eta, lam)
    assert value == pytest.approx(lik.value(eta, lam), rel=1e-15)
    c_eta, c_cross, c_lam = lik.curvature(eta, lam)

    def per_comparison(e, lm):
        return np.array([lik.rows(i, i + 1).value(e[i: i + 1], lm) for i in range(e.size)])

    h = 1e-5
    np.testing.assert_allclose(d_eta, (per_comparison(eta + h, lam) - per_comparison(eta - h, lam)) / (2 * h),
                               rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(c_eta, (lik.derivatives(eta + h, lam)[1] - lik.derivatives(eta - h, lam)[1])
                               / (2 * h), rtol=1e-6, atol=1e-9)
    if lik.ties == "half":
        assert d_lam is None and c_cross is None and c_lam == 0.0 and lik.n_extra == 0
        return
    assert lik.n_extra == 1
    np.testing.assert_allclose(d_lam, (per_comparison(eta, lam + h) - per_comparison(eta, lam - h)) / (2 * h),
                               rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(c_cross, (lik.derivatives(eta, lam + h)[1] - lik.derivatives(eta, lam - h)[1])
                               / (2 * h), rtol=1e-6, atol=1e-9)
    c_lam_t = (lik.derivatives(eta, lam + h)[2] - lik.derivatives(eta, lam - h)[2]) / (2 * h)
    assert c_lam == pytest.approx(c_lam_t.sum(), rel=1e-6)
    # Convex in (η_t, λ): each comparison's 2 × 2 curvature is positive semi-definite.
    assert np.all(c_eta * c_lam_t - c_cross**2 >= -1e-8)


def test_likelihood_knows_when_it_is_a_quasi_likelihood():
    plain, tied = np.array([0, 1, 1], dtype=np.int8), np.array([0.0, 0.5, 1.0])
    w = np.array([1.0, 2.0, 1.0])
    assert not model.Likelihood(plain).quasi and not model.Likelihood(plain, ties="davidson").quasi
    assert model.Likelihood(tied).quasi and not model.Likelihood(tied, ties="davidson").quasi
    assert model.Likelihood(plain, w).quasi and model.Likelihood(tied, w, "davidson").quasi


@pytest.mark.parametrize("cholesky", [False, True])
def test_sandwich_precision_inverts_the_sandwich_covariance(cholesky, monkeypatch):
    if cholesky:  # J's Cholesky factor from the first coordinate on (LLM-width sizes), eigh for a singular J
        bl.set_config(cholesky_min=1)
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((30, 4)), rng.standard_normal((30, 4))
    bread, meat = a.T @ a, b.T @ b
    expected = np.linalg.inv(np.linalg.inv(bread) @ meat @ np.linalg.inv(bread))
    np.testing.assert_allclose(model.sandwich_precision(bread, meat), expected, rtol=1e-10)
    # A direction no row reaches (a common null space) gets precision 0: the set is a cylinder there.
    basis = np.linalg.qr(rng.standard_normal((5, 5)))[0]
    lift = basis[:, :4]
    precision = model.sandwich_precision(lift @ bread @ lift.T, lift @ meat @ lift.T)
    np.testing.assert_allclose(precision @ basis[:, 4], 0.0, atol=1e-10)
    np.testing.assert_allclose(lift.T @ precision @ lift, expected, rtol=1e-8)
