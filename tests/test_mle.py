"""The unconstrained MLE of Θ against statsmodels, its sets, and its failure modes."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats
from scipy.optimize import linprog
from scipy.special import expit

import bayes_loco as bl
from bayes_loco import model, simulate


@pytest.fixture(scope="module")
def reference(random_problem, kron):
    """statsmodels' Newton fit of the same logistic regression on the explicit Kronecker design."""
    z = kron(random_problem.data.contexts, random_problem.data.differences)
    y = random_problem.data.labels.astype(float)
    return z, y, sm.Logit(y, z).fit(method="newton", tol=1e-12, disp=0)


@pytest.fixture(scope="module")
def mle(random_problem):
    with warnings.catch_warnings():
        warnings.simplefilter("error", bl.BayesLocoWarning)
        return bl.fit_mle(random_problem.data)


def test_mle_matches_statsmodels(mle, reference):
    _, _, ref = reference
    assert ref.mle_retvals["converged"]
    assert mle.diagnostics.converged and not mle.separated
    assert mle.theta.shape == (4, 5)
    assert np.abs(mle.theta.ravel() - ref.params).max() < 1e-4
    assert mle.loglik == pytest.approx(ref.llf, rel=1e-9)
    assert mle.nll == -mle.loglik
    assert mle.ridge == 0.0 and mle.diagnostics.n_iter >= 1
    assert mle.data is not None and mle.data.n == 4000


def test_mle_nll_is_the_likelihood_at_theta(mle, random_problem):
    d = random_problem.data
    assert mle.nll == pytest.approx(model.neg_log_likelihood(model.margins(mle.theta, d.contexts,
                                                                           d.differences), d.labels),
                                    rel=1e-12)
    assert mle.max_abs_margin == pytest.approx(np.abs(model.margins(mle.theta, d.contexts,
                                                                    d.differences)).max(), rel=1e-12)


def test_mle_is_stationary(mle, random_problem):
    d = random_problem.data
    grad = model.nll_and_gradient(mle.theta, d.contexts, d.differences, d.labels)[1]
    # the fit stops when the gradient of the mean NLL is below tol = 1e-8
    assert np.linalg.norm(grad) / d.n < 1e-7


def test_calibrated_set_is_the_wald_set(mle, reference):
    _, _, ref = reference
    cs = mle.calibrated_set(0.9)
    assert cs.kind == "wald" and cs.level == 0.9
    np.testing.assert_allclose(cs.center, mle.theta.ravel())
    info = np.linalg.inv(ref.cov_params())  # statsmodels' observed = expected information for the logit
    np.testing.assert_allclose(cs.precision, info, rtol=1e-6, atol=1e-6 * np.abs(info).max())
    assert cs.effective_dim == 20
    for level in (0.5, 0.9, 0.99):
        assert mle.calibrated_set(level).radius ** 2 == pytest.approx(stats.chi2.ppf(level, 20), rel=1e-12)
    # the coordinates are row-major vec(Θ)
    np.testing.assert_array_equal(cs.coordinates.to_coordinates(mle.theta), mle.theta.ravel())


@pytest.mark.parametrize("level", [0.0, 1.0, -0.1, 1.5])
def test_calibrated_set_level_out_of_range(mle, level):
    with pytest.raises(ValueError, match=r"^level must be in"):
        mle.calibrated_set(level)


def test_fit_and_sets_on_the_support_match_the_full_kronecker_design(random_problem, kron):
    """A zero context column and a zero difference column: the fit on the support is statsmodels' fit on the
    Kronecker design without those columns, and W (Gram and Fisher) is that design's, zero elsewhere."""
    d = random_problem.data
    contexts, diffs = d.contexts.copy(), d.differences.copy()
    contexts[:, 1], diffs[:, 3] = 0.0, 0.0
    data = bl.PreferenceData(contexts, diffs, d.labels)
    rows, cols = data.support
    np.testing.assert_array_equal(rows, [0, 2, 3])
    np.testing.assert_array_equal(cols, [0, 1, 2, 4])
    fit = bl.fit_mle(data)
    z = kron(contexts, diffs)
    reached = np.flatnonzero(np.abs(z).sum(axis=0) > 0)
    ref = sm.Logit(d.labels.astype(float), z[:, reached]).fit(method="newton", tol=1e-12, disp=0)
    np.testing.assert_allclose(fit.theta.ravel()[reached], ref.params, atol=1e-6)
    np.testing.assert_array_equal(np.delete(fit.theta.ravel(), reached), 0.0)
    np.testing.assert_allclose(fit.penalty_set().precision, z.T @ z, rtol=1e-12, atol=1e-9)
    p = expit(z @ fit.theta.ravel())
    np.testing.assert_allclose(fit.calibrated_set().precision, z.T @ ((p * (1 - p))[:, None] * z),
                               rtol=1e-10, atol=1e-9)
    assert fit.calibrated_set().effective_dim == reached.size == 12


def test_penalty_set(mle, reference):
    z, _, _ = reference
    for c2 in (0.0, 1.0, 5.0):
        gs = mle.penalty_set(c2)
        assert gs.kind == "gram" and gs.level is None
        # C₂·sqrt(d_x d_φ / N)
        assert gs.radius == pytest.approx(c2 * np.sqrt(20 / 4000), rel=1e-12)
        np.testing.assert_allclose(gs.center, mle.theta.ravel())
        np.testing.assert_allclose(gs.precision, z.T @ z, rtol=1e-10, atol=1e-8)
    with pytest.raises(ValueError, match=r"^c2 must be in"):
        mle.penalty_set(-1.0)


@pytest.mark.slow
def test_wald_set_coverage_and_calibration(random_problem_factory):
    """Over 300 seeded replications the 90% Wald set covers Θ* at a binomially consistent rate,
    and the Wald statistic (θ̂ − θ*)ᵀ I (θ̂ − θ*) has the χ²₂₀ mean.

    300 fits take about 20 s: a slow test. In the default run test_calibrated_set_is_the_wald_set pins
    the set this draws from (centre, statsmodels' information, the χ²₂₀ radius at three levels).
    """
    reps, level, d = 300, 0.9, 20
    stat = np.empty(reps)
    covered = 0
    for i in range(reps):
        prob = random_problem_factory(4, 5, 1000, seed=1000 + i)
        cs = bl.fit_mle(prob.data).calibrated_set(level)
        theta_star = prob.theta.ravel()
        stat[i] = cs.distance(theta_star) ** 2
        covered += bool(cs.contains(theta_star))
    se = np.sqrt(level * (1 - level) / reps)
    assert abs(covered / reps - level) < 4 * se, covered
    # mean of 300 χ²₂₀ draws: sd sqrt(2·20/300)
    assert abs(stat.mean() - d) < 4 * np.sqrt(2 * d / reps), stat.mean()


def test_error_shrinks_like_inverse_sqrt_n(random_problem_factory):
    """E‖Θ̂ − Θ*‖_F ∝ 1/sqrt(N): going from N = 2000 to 8000 halves it.

    With 20 parameters ‖Θ̂ − Θ*‖ has relative sd ≈ 1/sqrt(2·20) ≈ 0.16 per fit; averaging
    12 seeds and taking a ratio gives ≈ 0.065, so [1.5, 2.6] is ±4 sd around 2.
    """
    errors = {}
    for n in (2000, 8000):
        errs = []
        for seed in range(12):
            prob = random_problem_factory(4, 5, n, seed=500 + seed)
            errs.append(np.linalg.norm(bl.fit_mle(prob.data).theta - prob.theta))
        errors[n] = np.mean(errs)
    ratio = errors[2000] / errors[8000]
    assert 1.5 < ratio < 2.6, ratio
    assert errors[8000] < 0.2  # and it is small in absolute terms (‖Θ*‖_F ≈ 1.8)


def test_ridge_shrinks_and_matches_penalised_optimum(random_problem, reference):
    z, y, _ = reference
    d = random_problem.data
    norms = []
    for lam in (0.0, 10.0, 100.0, 1000.0):
        fit = bl.fit_mle(d, ridge=lam)
        assert fit.ridge == lam and fit.diagnostics.converged
        grad = model.nll_and_gradient(fit.theta, d.contexts, d.differences, d.labels)[1]
        # first-order condition of Σ NLL + (λ/2)‖Θ‖²
        assert np.linalg.norm(grad + lam * fit.theta) / d.n < 1e-7
        norms.append(np.linalg.norm(fit.theta))
        if lam > 0:
            # statsmodels' elastic net with L1_wt = 0 minimises −loglik/N + (α/2)‖β‖²
            ref = sm.GLM(y, z, family=sm.families.Binomial()).fit_regularized(
                alpha=lam / d.n, L1_wt=0.0, cnvrg_tol=1e-12)
            assert np.abs(fit.theta.ravel() - ref.params).max() < 5e-4
    assert all(a > b for a, b in itertools.pairwise(norms)), norms
    assert norms[-1] < 0.5 * norms[0]


def _separable_tiny(margins):
    d = np.array(margins, dtype=float)[:, None]
    return bl.PreferenceData(np.ones_like(d), d, (d[:, 0] > 0).astype(int))


def test_separation_is_detected_on_tiny_separable_data():
    data = _separable_tiny([0.1, -0.5, 2.0, -3.0])
    with pytest.warns(bl.SeparationWarning, match="separable"):
        fit = bl.fit_mle(data)
    assert fit.separated
    assert fit.max_abs_margin > 30


def test_separation_is_detected_on_random_separable_data():
    rng = np.random.default_rng(0)
    x, dphi, theta = rng.normal(size=(10, 2)), rng.normal(size=(10, 3)), rng.normal(size=(2, 3))
    y = (np.einsum("ij,ij->i", x @ theta, dphi) > 0).astype(int)
    with pytest.warns(bl.SeparationWarning):
        fit = bl.fit_mle(bl.PreferenceData(x, dphi, y))
    assert fit.separated


def test_separation_is_detected_with_equal_margins():
    data = _separable_tiny([1.0, -1.0, 1.0, -1.0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = bl.fit_mle(data)
    assert fit.separated
    assert any(issubclass(w.category, bl.SeparationWarning) for w in caught)


def _separation_certificate(data, kron):
    """Albert–Anderson: the MLE is infinite iff some β ≠ 0 has s_t z_tᵀβ ≥ 0 for all t (s_t = 2y_t − 1).

    The LP max Σ_t s_t z_tᵀβ s.t. s_t z_tᵀβ ≥ 0, −1 ≤ β ≤ 1 has a positive optimum exactly then.
    """
    z = kron(data.contexts, data.differences)
    a = (2.0 * data.labels - 1.0)[:, None] * z
    res = linprog(-a.sum(axis=0), A_ub=-a, b_ub=np.zeros(data.n), bounds=(-1, 1), method="highs")
    assert res.status == 0
    return -res.fun


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_quasi_separation_in_imbalanced_paper_data_is_flagged(seed, kron):
    """q = 10, N = 1000: rarely compared actions are separable (certified by an LP), so the MLE
    does not exist and fit_mle must say so rather than return a silent garbage fit."""
    problem = simulate.paper_problem(rank=3, imbalance=10)
    data = problem.sample(1000, seed=seed)
    assert _separation_certificate(data, kron) > 1.0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = bl.fit_mle(data)
    assert fit.separated
    assert any(issubclass(w.category, bl.SeparationWarning) for w in caught)


def test_non_separable_data_have_no_certificate(random_problem, mle, kron):
    assert _separation_certificate(random_problem.data, kron) == pytest.approx(0.0, abs=1e-9)
    assert not mle.separated
    tiny = _separable_tiny([0.1, -0.5, 2.0, -3.0])
    assert _separation_certificate(tiny, kron) > 1.0


def test_ridge_removes_separation():
    data = _separable_tiny([0.1, -0.5, 2.0, -3.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", bl.BayesLocoWarning)
        fit = bl.fit_mle(data, ridge=1.0)
    assert not fit.separated and fit.diagnostics.converged
    grad = model.nll_and_gradient(fit.theta, data.contexts, data.differences, data.labels)[1]
    np.testing.assert_allclose(grad + 1.0 * fit.theta, 0.0, atol=1e-6)
    assert 0 < fit.theta[0, 0] < 10


def test_unreached_directions_stay_at_zero(random_problem):
    d = random_problem.data
    diffs = d.differences.copy()
    diffs[:, 2] = 0.0
    fit = bl.fit_mle(bl.PreferenceData(d.contexts, diffs, d.labels))
    np.testing.assert_array_equal(fit.theta[:, 2], 0.0)
    assert np.abs(fit.theta[:, [0, 1, 3, 4]]).min() > 0
    # so its Wald set is a cylinder with k_eff = 4·4
    assert fit.calibrated_set().effective_dim == 16


def test_iteration_limit_warns(random_problem):
    with pytest.warns(bl.ConvergenceWarning, match="max_iter"):
        fit = bl.fit_mle(random_problem.data, max_iter=1)
    assert not fit.diagnostics.converged and fit.diagnostics.n_iter == 1


@pytest.mark.parametrize(("kwargs", "error", "pattern"), [
    ({"ridge": -1.0}, ValueError, "^ridge must be in"),
    ({"ridge": float("nan")}, ValueError, "^ridge must be in"),
    ({"ridge": "1"}, TypeError, "^ridge must be a real number"),
    ({"max_iter": 0}, ValueError, "^max_iter must be"),
    ({"tol": 0.0}, ValueError, "^tol must be in"),
])
def test_bad_arguments_are_named(random_problem, kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        bl.fit_mle(random_problem.data, **kwargs)


def test_data_must_be_preference_data(random_problem):
    d = random_problem.data
    with pytest.raises(TypeError, match=r"^data must be a PreferenceData, got tuple"):
        bl.fit_mle((d.contexts, d.differences, d.labels))


def test_information_matrix_refuses_when_too_large():
    rng = np.random.default_rng(0)
    data = bl.PreferenceData(rng.standard_normal((3, 2)), rng.standard_normal((3, 8200)), [0, 1, 0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bl.BayesLocoWarning)
        fit = bl.fit_mle(data, ridge=1.0)
    assert fit.theta.shape == (2, 8200)
    with pytest.raises(MemoryError, match="GiB"):
        fit.penalty_set()
    with pytest.raises(MemoryError, match="GiB"):
        fit.calibrated_set()


def test_large_margins_of_a_finite_mle_are_not_called_separation(kron):
    """A strong, identified signal has |η| > 30 on some rows; only a receding fit is separation."""
    rng = np.random.default_rng(11)
    n, d_x, d_phi = 6000, 3, 3
    x, dphi = rng.normal(size=(n, d_x)), rng.normal(size=(n, d_phi))
    theta = rng.normal(scale=2.5, size=(d_x, d_phi))
    eta = np.einsum("ij,ij->i", x @ theta, dphi)
    y = (rng.random(n) < expit(eta)).astype(int)
    data = bl.PreferenceData(x, dphi, y)
    assert _separation_certificate(data, kron) < 1e-8  # the LP says: not separable, the MLE is finite
    with warnings.catch_warnings():
        warnings.simplefilter("error", bl.SeparationWarning)
        fit = bl.fit_mle(data)
    assert fit.max_abs_margin > 30
    assert not fit.separated
    reference = sm.Logit(y.astype(float), kron(x, dphi)).fit(method="newton", tol=1e-12, disp=0)
    assert np.abs(fit.theta.ravel() - reference.params).max() < 1e-4


def test_exact_newton_and_newton_cg_reach_the_same_mle(random_problem, reference):
    """Formed differences take Newton's method on the whole Hessian under ``exact_newton_flops``
    and Newton-CG above it: both are the statsmodels optimum to its tolerance."""
    fits = {}
    for flops in (10**12, 0):
        with bl.config_context(exact_newton_flops=flops):
            fits[flops] = bl.fit_mle(random_problem.data)
    assert fits[10**12].diagnostics.method == "newton-exact" and fits[0].diagnostics.method == "newton-cg"
    # statsmodels' standard errors set the scale: both fits are within 1e-4 of one of them of its optimum.
    se = reference[2].bse.reshape(fits[0].theta.shape)
    for fit in fits.values():
        assert np.abs((fit.theta - reference[2].params.reshape(fit.theta.shape)) / se).max() < 1e-4


@pytest.mark.parametrize("flops", [10**12, 0])
def test_both_solvers_flag_certified_separation(flops, kron):
    data = simulate.paper_problem(rank=3, imbalance=10).sample(1000, seed=5)
    assert _separation_certificate(data, kron) > 1.0
    with bl.config_context(exact_newton_flops=flops), pytest.warns(bl.SeparationWarning, match="separable"):
        fit = bl.fit_mle(data)
    assert fit.separated
