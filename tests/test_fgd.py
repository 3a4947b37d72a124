"""FGD (Burer–Monteiro) rank-r MLE: optimality on the rank-r manifold, both solvers, recovery."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import bayes_loco as bl
from bayes_loco import model, simulate
from bayes_loco.frequentist import fgd


def _nll(theta, data):
    return model.neg_log_likelihood(model.margins(theta, data.contexts, data.differences), data.labels)


def _grad(theta, data):
    return model.nll_and_gradient(theta, data.contexts, data.differences, data.labels)[1]


def _truncated_svd(theta, rank):
    u, s, vt = np.linalg.svd(theta, full_matrices=False)
    return (u[:, :rank] * s[:rank]) @ vt[:rank]


def _tangent_projection(theta, rank, g):
    """P_T(G) = P_U G + G P_V − P_U G P_V on the tangent space of the rank-r manifold at Θ."""
    u, _, vt = np.linalg.svd(theta, full_matrices=False)
    pu, pv = u[:, :rank] @ u[:, :rank].T, vt[:rank].T @ vt[:rank]
    return pu @ g + g @ pv - pu @ g @ pv


def _quiet(func, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error", bl.BayesLocoWarning)
        return func(*args, **kwargs)


# ----------------------------------------------------------------------------- paper simulation, q = 3


def test_result_is_rank_r_with_consistent_factors(paper_q3):
    fit = paper_q3.low_rank
    assert fit.rank == 3
    assert fit.left.shape == (20, 3) and fit.right.shape == (29, 3)
    np.testing.assert_allclose(fit.theta, fit.left @ fit.right.T, rtol=1e-12, atol=1e-12)
    assert np.linalg.matrix_rank(fit.theta) == 3
    sv = np.linalg.svd(fit.theta, compute_uv=False)
    np.testing.assert_allclose(fit.singular_values, sv[:3], rtol=1e-12)
    assert sv[3] <= 1e-12 * sv[0] and sv[2] > 1e-3 * sv[0]  # exactly rank 3, not a degenerate fit
    assert fit.n_params == (20 + 29) * 3 - 3 * 3
    assert fit.initial is paper_q3.mle
    assert fit.diagnostics.converged and fit.diagnostics.n_iter >= 1
    assert "rank=3" in repr(fit)


def test_reported_likelihood_and_objective(paper_q3):
    fit = paper_q3.low_rank
    assert fit.nll == pytest.approx(_nll(fit.theta, paper_q3.data), rel=1e-12)
    balance = fit.left.T @ fit.left - fit.right.T @ fit.right
    assert fit.objective == pytest.approx(fit.nll + 0.125 * np.sum(balance**2), rel=1e-12)
    # ‖∇F‖ with ∇_U F = ∇L V + ½U(UᵀU − VᵀV), ∇_V F = ∇Lᵀ U − ½V(UᵀU − VᵀV), and the stopping rule
    g = _grad(fit.theta, paper_q3.data)
    gu = g @ fit.right + 0.5 * fit.left @ balance
    gv = g.T @ fit.left - 0.5 * fit.right @ balance
    assert fit.grad_norm == pytest.approx(np.sqrt(np.sum(gu**2) + np.sum(gv**2)), rel=1e-6)
    assert fit.grad_norm / paper_q3.data.n <= 1e-8 * max(1.0, np.linalg.norm(fit.theta))


def test_objective_read_in_cache_sized_blocks_is_the_objective(random_low_rank_problem, monkeypatch):
    """The one-pass blocked loss (ΔΦ above the cache) equals the whole-array one, and ∇L matches Θ's."""
    data = random_low_rank_problem.data
    rng = np.random.default_rng(3)
    u, v = rng.standard_normal((data.d_x, 2)), rng.standard_normal((data.d_phi, 2))
    args = (u, v, np.array([]), data.contexts, data.differences, model.Likelihood(data.labels), 0.7)
    whole = fgd._objective(*args)
    bl.set_config(cache_bytes=0)
    bl.set_config(fused_block_bytes=8 * data.d_phi * 7)  # 7 rows a block, a ragged last one
    assert data.n % 7
    blocked = fgd._objective(*args)
    assert blocked[0] == pytest.approx(whole[0], rel=1e-13)
    assert blocked[4] == pytest.approx(_nll(u @ v.T, data), rel=1e-13)
    assert blocked[3].shape == (0,)  # no log ν without Davidson's model
    np.testing.assert_allclose(blocked[1], whole[1], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(blocked[2], whole[2], rtol=1e-12, atol=1e-12)
    balance = u.T @ u - v.T @ v
    g = _grad(u @ v.T, data)
    np.testing.assert_allclose(blocked[2], g.T @ u + 0.7 * v @ (u.T @ u) - 0.5 * v @ balance, rtol=1e-10)


def test_factors_are_balanced(paper_q3):
    u, v = paper_q3.low_rank.left, paper_q3.low_rank.right
    assert np.linalg.norm(u.T @ u - v.T @ v) <= 1e-4 * np.linalg.norm(u.T @ u)


def test_gradient_vanishes_on_the_tangent_space(paper_q3):
    data, fit = paper_q3.data, paper_q3.low_rank
    start = _truncated_svd(paper_q3.mle.theta, 3)
    at_start = np.linalg.norm(_tangent_projection(start, 3, _grad(start, data)))
    at_fit = np.linalg.norm(_tangent_projection(fit.theta, 3, _grad(fit.theta, data)))
    assert at_start > 1.0  # the truncated SVD of the MLE is not stationary: the check has power
    assert at_fit <= 1e-4 * at_start, (at_fit, at_start)
    # the normal component need not vanish: the rank constraint binds
    assert np.linalg.norm(_grad(fit.theta, data)) > 100 * at_fit


def test_improves_on_its_start(paper_q3):
    data, fit = paper_q3.data, paper_q3.low_rank
    start = _truncated_svd(paper_q3.mle.theta, 3)
    assert -fit.nll > -_nll(start, data) + 1.0
    # but cannot beat the unconstrained maximum
    assert fit.nll >= paper_q3.mle.nll


def test_refits_the_initial_mle_when_not_given(random_low_rank_problem):
    data = random_low_rank_problem.data
    fit = _quiet(bl.fit_low_rank, data, 2)
    assert fit.initial.data is data
    np.testing.assert_allclose(fit.initial.theta, bl.fit_mle(data).theta, rtol=1e-10, atol=1e-10)


# ----------------------------------------------------------------------------- the spectral start


def test_spectral_start_is_the_scaled_truncated_score(paper_q3):
    """Θ₀ = α S_r with S = Σ (y − ½) x Δφᵀ (an explicit sum here) and α the minimiser along the ray:
    a grid of 2001 points and the ray's derivative, by central differences, agree."""
    data = paper_q3.data
    score = sum((y - 0.5) * np.outer(x, d) for x, d, y in zip(data.contexts, data.differences, data.labels,
                                                              strict=True))
    truncated = _truncated_svd(score, 3)
    theta0 = bl.spectral_start(data, 3, ridge=2.0)
    alpha = np.sum(theta0 * truncated) / np.sum(truncated * truncated)
    np.testing.assert_allclose(theta0, alpha * truncated, rtol=1e-8, atol=1e-12)

    def along(a):
        return _nll(a * truncated, data) + 0.5 * 2.0 * a**2 * np.sum(truncated**2)

    grid = np.linspace(0.0, 4 * alpha, 2001)
    best = grid[np.argmin([along(a) for a in grid])]
    assert abs(best - alpha) <= 2 * alpha / 500
    h = 1e-4 * alpha
    assert abs(along(alpha + h) - along(alpha - h)) / (2 * h) <= 1e-3 * abs(
        (along(2 * alpha) - along(alpha)) / alpha)
    assert alpha > 0


def test_spectral_start_of_balanced_labels_is_zero():
    x = np.ones((4, 2))
    d = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
    data = bl.PreferenceData(x, d, [1, 0, 1, 0])
    np.testing.assert_array_equal(bl.spectral_start(data, 1), 0.0)


@pytest.mark.parametrize("theta_kind", ["paper", "diagonal"])
def test_spectral_and_mle_starts_reach_the_same_fit(theta_kind):
    """On the paper's simulation FGD from the spectral start ends where it ends from the paper's MLE start."""
    problem = simulate.paper_problem(rank=3, imbalance=3, theta_kind=theta_kind)
    data = problem.sample(3000, seed=4)
    mle = _quiet(bl.fit_low_rank, data, 3, ridge=1.0, start="mle")
    spectral = _quiet(bl.fit_low_rank, data, 3, ridge=1.0, start="spectral")
    assert spectral.start == "spectral" and spectral.initial is None and mle.start == "mle"
    assert spectral.diagnostics.converged
    assert spectral.objective == pytest.approx(mle.objective, rel=1e-9)
    assert np.linalg.norm(spectral.theta - mle.theta) <= 1e-5 * np.linalg.norm(mle.theta)


def test_auto_start_takes_the_mle_up_to_its_size_limit(random_low_rank_problem, monkeypatch):
    data = random_low_rank_problem.data
    assert _quiet(bl.fit_low_rank, data, 2).start == "mle"
    bl.set_config(mle_start_max=data.d_x * data.d_phi - 1)
    fit = _quiet(bl.fit_low_rank, data, 2)
    assert fit.start == "spectral" and fit.initial is None
    given = _quiet(bl.fit_mle, data)
    assert _quiet(bl.fit_low_rank, data, 2, initial=given).initial is given
    with pytest.raises(ValueError, match="start='spectral'"):
        bl.fit_low_rank(data, 2, initial=given, start="spectral")


@pytest.mark.slow
def test_methods_agree_on_paper_simulation(paper_q3):
    alt = _quiet(bl.fit_low_rank, paper_q3.data, 3, method="alternating", initial=paper_q3.mle)
    lbfgs = paper_q3.low_rank
    assert alt.diagnostics.converged and lbfgs.diagnostics.converged
    assert np.linalg.norm(alt.theta - lbfgs.theta) <= 1e-4 * np.linalg.norm(lbfgs.theta)
    assert alt.nll == pytest.approx(lbfgs.nll, rel=1e-8)


# ----------------------------------------------------------------------------- smaller problems


@pytest.mark.parametrize("theta_kind", ["paper", "diagonal"])
def test_methods_agree_on_a_small_paper_problem(theta_kind):
    problem = simulate.paper_problem(d_s=5, d_a=6, d_x=8, rank=3, imbalance=3, seed=0, theta_kind=theta_kind)
    data = problem.sample(3000, seed=5)
    mle = _quiet(bl.fit_mle, data)
    fits = {m: _quiet(bl.fit_low_rank, data, 3, method=m, initial=mle) for m in ("lbfgs", "alternating")}
    a, b = fits["lbfgs"], fits["alternating"]
    assert a.diagnostics.converged and b.diagnostics.converged
    assert np.linalg.norm(a.theta - b.theta) <= 1e-4 * np.linalg.norm(a.theta)
    for fit in (a, b):
        g = _tangent_projection(fit.theta, 3, _grad(fit.theta, data))
        start = _truncated_svd(mle.theta, 3)
        assert np.linalg.norm(g) <= 1e-3 * np.linalg.norm(_tangent_projection(start, 3, _grad(start, data)))
        assert fit.nll <= _nll(start, data)


@pytest.mark.parametrize("method", ["lbfgs", "alternating"])
def test_full_rank_fit_reaches_the_mle_from_another_start(method):
    """At r = min(d_x, d_φ) the manifold is everything, so FGD must find the unconstrained MLE —
    here started from a heavily ridged MLE, not from the answer. Θ* has singular values
    (1.2, 1.0, 0.8), so the factored problem is well conditioned for plain gradient steps too."""
    rng = np.random.default_rng(42)
    u, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    v, _ = np.linalg.qr(rng.standard_normal((4, 3)))
    theta = u @ np.diag([1.2, 1.0, 0.8]) @ v.T
    x, dphi = rng.standard_normal((3000, 3)), rng.standard_normal((3000, 4))
    y = (rng.random(3000) < 1 / (1 + np.exp(-np.sum((x @ theta) * dphi, axis=1)))).astype(int)
    data = bl.PreferenceData(x, dphi, y)
    mle = _quiet(bl.fit_mle, data)
    start = _quiet(bl.fit_mle, data, ridge=2000.0)
    assert np.linalg.norm(start.theta - mle.theta) > 0.3 * np.linalg.norm(mle.theta)
    fit = _quiet(bl.fit_low_rank, data, 3, method=method, initial=start)
    assert np.linalg.norm(fit.theta - mle.theta) <= 1e-4 * np.linalg.norm(mle.theta)


def test_ridge_solution_is_stationary_for_the_penalised_objective(random_low_rank_problem):
    data, lam = random_low_rank_problem.data, 50.0
    fit = _quiet(bl.fit_low_rank, data, 2, ridge=lam)
    assert fit.initial.ridge == lam
    g = _grad(fit.theta, data) + lam * fit.theta
    start = _truncated_svd(fit.initial.theta, 2)
    g0 = _grad(start, data) + lam * start
    assert np.linalg.norm(_tangent_projection(fit.theta, 2, g)) <= 1e-4 * np.linalg.norm(
        _tangent_projection(start, 2, g0))
    unpenalised = _quiet(bl.fit_low_rank, data, 2)
    assert np.linalg.norm(fit.theta) < np.linalg.norm(unpenalised.theta)


def test_low_rank_beats_mle_on_a_rank_one_truth(random_problem_factory):
    """d_x = 8, d_φ = 10, r = 1: 17 free parameters instead of 80, so the error is about half."""
    ratios = []
    for seed in range(5):
        prob = random_problem_factory(8, 10, 2000, seed=seed, rank=1, scale=0.15)
        mle = _quiet(bl.fit_mle, prob.data)
        fit = _quiet(bl.fit_low_rank, prob.data, 1, initial=mle)
        ratios.append(np.linalg.norm(fit.theta - prob.theta) / np.linalg.norm(mle.theta - prob.theta))
    assert np.mean(ratios) < 0.75, ratios


@pytest.mark.slow
@pytest.mark.parametrize("theta_kind", ["paper", "diagonal"])
def test_low_rank_beats_mle_on_paper_simulation(theta_kind):
    problem = simulate.paper_problem(rank=3, imbalance=1, theta_kind=theta_kind)
    gaps = []
    for seed in range(3):
        data = problem.sample(10_000, seed=seed)
        mle = _quiet(bl.fit_mle, data)
        fit = _quiet(bl.fit_low_rank, data, 3, initial=mle)
        gaps.append(np.linalg.norm(mle.theta - problem.theta) - np.linalg.norm(fit.theta - problem.theta))
    assert np.mean(gaps) > 0.1, gaps


# ----------------------------------------------------------------------------- arguments and warnings


@pytest.mark.parametrize("method", ["lbfgs", "alternating"])
def test_iteration_limit_warns(paper_q3, method):
    with pytest.warns(bl.ConvergenceWarning, match="fit_low_rank"):
        fit = bl.fit_low_rank(paper_q3.data, 3, method=method, max_iter=1, initial=paper_q3.mle)
    assert not fit.diagnostics.converged


@pytest.mark.parametrize("rank", [0, 5, 6])
def test_rank_out_of_range_is_named(random_problem, rank):
    with pytest.raises(ValueError, match=r"^rank must be in \[1, 4\]"):
        bl.fit_low_rank(random_problem.data, rank)


@pytest.mark.parametrize(("kwargs", "error", "pattern"), [
    ({"rank": 2.0}, TypeError, "^rank must be an integer"),
    ({"method": "newton"}, ValueError, "^method must be one of"),
    ({"ridge": -0.1}, ValueError, "^ridge must be in"),
    ({"max_iter": 0}, ValueError, "^max_iter must be"),
    ({"tol": -1.0}, ValueError, "^tol must be in"),
    ({"start": "svd"}, ValueError, "^start must be one of"),
])
def test_bad_arguments_are_named(random_problem, kwargs, error, pattern):
    args = {"rank": 2} | kwargs
    with pytest.raises(error, match=pattern):
        bl.fit_low_rank(random_problem.data, **args)


def test_data_must_be_preference_data():
    with pytest.raises(TypeError, match=r"^data must be a PreferenceData"):
        bl.fit_low_rank(np.zeros((3, 3)), 1)
