"""PRS: the reduced MLE θ̂_rtv, its Gram and Wald ellipsoids, data splits."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats

import bayes_loco as bl
from bayes_loco import model, simulate
from bayes_loco.frequentist import prs as _prs_module


def _reduced_design(basis, contexts, differences):
    """Explicit reduced features: blocks 11, 12, 21 (row-major) of Ûᵀ x Δφᵀ V̂, row by row."""
    r = basis.rank
    rows = []
    for x, d in zip(contexts, differences, strict=True):
        m = basis.left.T @ np.outer(x, d) @ basis.right
        rows.append(np.concatenate([m[:r, :r].ravel(), m[:r, r:].ravel(), m[r:, :r].ravel()]))
    return np.array(rows)


def _quiet(func, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error", bl.BayesLocoWarning)
        return func(*args, **kwargs)


@pytest.fixture(scope="module")
def prs_random(random_low_rank_problem):
    return _quiet(bl.fit_prs, random_low_rank_problem.data, 2)


def test_dimensions_radius_and_set(prs_random, random_low_rank_problem):
    fit, data = prs_random, random_low_rank_problem.data
    k = (4 + 5) * 2 - 2 * 2
    assert fit.rank == 2 and fit.k == k and fit.theta_rtv.shape == (k,)
    assert fit.n_initial is None and fit.estimation_data is data
    # the paper's C₂ = 5 is the default: C = 5·sqrt(k/N)
    assert fit.penalty_set().radius == pytest.approx(5.0 * np.sqrt(k / 4000), rel=1e-12)
    z = _reduced_design(fit.basis, data.contexts, data.differences)
    np.testing.assert_allclose(fit.gram, z.T @ z, rtol=1e-10, atol=1e-8)
    s = fit.penalty_set()
    assert s.kind == "gram" and s.level is None and s.coordinates is fit.basis
    np.testing.assert_array_equal(s.center, fit.theta_rtv)
    np.testing.assert_array_equal(s.precision, fit.gram)
    assert s.effective_dim == k
    np.testing.assert_allclose(fit.theta, fit.basis.to_theta(fit.theta_rtv))
    np.testing.assert_allclose(fit.basis.block22(fit.theta), 0.0, atol=1e-12)
    assert f"k={k}" in repr(fit)


def test_basis_comes_from_the_low_rank_fit(prs_random):
    lr = prs_random.low_rank
    assert lr.rank == 2
    np.testing.assert_allclose(prs_random.basis.block22(lr.theta), 0.0, atol=1e-10)
    # Without a split the reduced MLE is FGD's own estimate: the RTV subspace is the tangent space of
    # the rank-r manifold at Θ̂, where FGD's stationarity makes the (convex) reduced likelihood flat.
    own = prs_random.basis.to_coordinates(lr.theta)
    np.testing.assert_allclose(prs_random.theta_rtv, own, rtol=0, atol=1e-6 * np.linalg.norm(own))
    f, a, _ = _prs_module._reduced_design(prs_random.basis, prs_random.estimation_data)
    gradient = a(model.residuals(f(own), prs_random.estimation_data.labels))
    assert np.linalg.norm(gradient) / prs_random.estimation_data.n < 1e-7
    # with a split it is a refit on other comparisons, near but not at the first half's fit
    split = _quiet(bl.fit_prs, prs_random.estimation_data, 2, n_initial=2000)
    own = split.basis.to_coordinates(split.low_rank.theta)
    assert 0.01 * np.linalg.norm(own) < np.linalg.norm(split.theta_rtv - own) < 0.5 * np.linalg.norm(own)


@pytest.mark.parametrize("fraction", [None, 0.5])
def test_reduced_mle_matches_statsmodels(random_low_rank_problem, fraction):
    data = random_low_rank_problem.data
    n0 = None if fraction is None else int(fraction * data.n)
    fit = _quiet(bl.fit_prs, data, 2, n_initial=n0)
    est = data if n0 is None else data.subset(slice(n0, None))
    z = _reduced_design(fit.basis, est.contexts, est.differences)
    ref = sm.Logit(est.labels.astype(float), z).fit(method="newton", tol=1e-12, disp=0)
    assert ref.mle_retvals["converged"] and fit.diagnostics.converged and not fit.separated
    assert np.abs(fit.theta_rtv - ref.params).max() < 1e-4
    assert -fit.nll == pytest.approx(ref.llf, rel=1e-9)
    # the confidence set is the Wald set of that regression
    cs = fit.calibrated_set(0.9)
    info = np.linalg.inv(ref.cov_params())
    np.testing.assert_allclose(cs.precision, info, rtol=1e-6, atol=1e-6 * np.abs(info).max())
    assert cs.kind == "wald" and cs.level == 0.9 and cs.effective_dim == fit.k


@pytest.mark.parametrize("fraction", [0.2, 0.5, 0.8])
def test_split_uses_first_rows_for_subspace_and_rest_for_estimation(random_low_rank_problem, fraction):
    data = random_low_rank_problem.data
    n0 = int(fraction * data.n)
    fit = _quiet(bl.fit_prs, data, 2, n_initial=n0)
    assert fit.n_initial == n0
    assert fit.estimation_data.n == data.n - n0
    np.testing.assert_array_equal(fit.estimation_data.contexts, data.contexts[n0:])
    np.testing.assert_array_equal(fit.estimation_data.labels, data.labels[n0:])
    first = fit.low_rank.initial.data
    assert first.n == n0
    np.testing.assert_array_equal(first.differences, data.differences[:n0])
    assert fit.penalty_set().radius == pytest.approx(5.0 * np.sqrt(fit.k / (data.n - n0)), rel=1e-12)
    z = _reduced_design(fit.basis, data.contexts[n0:], data.differences[n0:])
    np.testing.assert_allclose(fit.gram, z.T @ z, rtol=1e-10, atol=1e-8)


def test_precomputed_low_rank_is_reused(prs_random, random_low_rank_problem):
    lr = prs_random.low_rank
    fit = _quiet(bl.fit_prs, random_low_rank_problem.data, 2, low_rank=lr)
    assert fit.low_rank is lr
    np.testing.assert_allclose(fit.theta_rtv, prs_random.theta_rtv, rtol=1e-12, atol=1e-12)
    assert fit.penalty_set(2.0).radius == pytest.approx(prs_random.penalty_set().radius * 2.0 / 5.0,
                                                        rel=1e-12)
    with pytest.raises(ValueError, match=r"low_rank has rank 2, but rank=3"):
        bl.fit_prs(random_low_rank_problem.data, 3, low_rank=lr)


def test_max_iter_bounds_the_low_rank_fit_it_makes(random_low_rank_problem):
    data = random_low_rank_problem.data
    with pytest.warns(bl.ConvergenceWarning, match="FGD stopped after 3 iterations"):
        fit = bl.fit_prs(data, 2, n_initial=data.n // 2, max_iter=3)
    assert fit.low_rank.diagnostics.n_iter == 3 and not fit.low_rank.diagnostics.converged


@pytest.mark.parametrize("level", [0.5, 0.9, 0.99])
def test_calibrated_set_radius_is_chi2_quantile(prs_random, level):
    cs = prs_random.calibrated_set(level)
    assert cs.radius ** 2 == pytest.approx(stats.chi2.ppf(level, cs.effective_dim), rel=1e-12)
    np.testing.assert_array_equal(cs.center, prs_random.theta_rtv)


@pytest.mark.parametrize("level", [0.0, 1.0, 2.0])
def test_calibrated_set_level_out_of_range(prs_random, level):
    with pytest.raises(ValueError, match=r"^level must be in"):
        prs_random.calibrated_set(level)


def test_effective_dimension_on_paper_simulation(paper_q1_prs):
    """k = (d_x + d_φ) r − r² = 138; k_eff = 78 (docs/design.md, convention 1): Δφ only spans the
    m = d_a − 1 = 9 action directions (state features cancel) and V̂'s first r columns lie in them
    (Θ̂'s state columns stay 0), so block 11 has r², block 12 has r(m − r) and block 21 has (d_x − r)r
    reachable coordinates."""
    problem, _, prs = paper_q1_prs
    d_x, m, r = 20, problem.d_a - 1, 3
    assert prs.k == (20 + 29) * 3 - 9 == 138
    k_eff = r * r + r * (m - r) + (d_x - r) * r
    assert k_eff == 78
    assert prs.penalty_set().effective_dim == k_eff
    cs = prs.calibrated_set(0.9)
    assert cs.effective_dim == k_eff
    assert cs.radius ** 2 == pytest.approx(stats.chi2.ppf(0.9, k_eff), rel=1e-12)
    assert prs.penalty_set().radius == pytest.approx(5.0 * np.sqrt(138 / 3000), rel=1e-12)


def test_implicit_design_path_matches_the_explicit_one(paper_q1_prs, monkeypatch):
    """With the design never formed (the path for N × k above one block) and W summed from the RTV
    coordinates' Kronecker structure (the path above ``config["gram_panel"]`` coordinates), the paper's
    simulation gives θ̂_rtv to 1e-8, the same Gram and Fisher W to 1e-10, and the same exact-Wald policy."""
    problem, data, explicit = paper_q1_prs
    assert explicit.gram is not None
    wald = {"explicit": explicit.calibrated_set(0.9)}  # from the formed design, before the patches
    bl.set_config(design_block_bytes=500 * explicit.k * 8)  # 6 blocks of 500 rows
    bl.set_config(gram_panel=1)
    bl.set_config(pair_panel=7)  # ragged panels over d_φ = 29
    implicit = _quiet(bl.fit_prs, data, 3, low_rank=explicit.low_rank)
    assert implicit.gram is None
    np.testing.assert_allclose(implicit.theta_rtv, explicit.theta_rtv, rtol=0, atol=1e-8)
    np.testing.assert_allclose(implicit.penalty_set().precision, explicit.gram, rtol=1e-10, atol=1e-8)
    wald["implicit"] = implicit.calibrated_set(0.9)
    np.testing.assert_allclose(wald["implicit"].precision, wald["explicit"].precision, rtol=1e-10, atol=1e-8)
    population = problem.population(300, seed=2)
    policies = {name: bl.pessimistic_policy(s, population, objective="exact") for name, s in wald.items()}
    np.testing.assert_array_equal(policies["implicit"].actions, policies["explicit"].actions)
    assert policies["implicit"].pessimistic_value == pytest.approx(policies["explicit"].pessimistic_value,
                                                                   rel=1e-8)


def test_penalty_set_is_not_a_confidence_set(paper_q1_prs, paper_q3):
    """docs/design.md, pessimism point 1: with W = Σ z zᵀ and C₂ = 5 the set contained θ*_rtv in 0 of 6
    seeds at N = 3000.
    Three seeds here (q = 1 twice, q = 3 once); at most one may contain it."""
    problem1, _, prs1 = paper_q1_prs
    fits = [(problem1, prs1),
            (paper_q3.problem, _quiet(bl.fit_prs, paper_q3.data, 3, low_rank=paper_q3.low_rank))]
    fits.append((problem1, _quiet(bl.fit_prs, problem1.sample(3000, seed=2), 3)))
    contained, ratios = 0, []
    for problem, prs in fits:
        truth = prs.basis.to_coordinates(problem.theta)
        contained += bool(prs.penalty_set().contains(truth))
        ratios.append(float(prs.penalty_set().distance(truth) / prs.penalty_set().radius))
    assert contained <= 1, ratios


@pytest.mark.parametrize("c2", [-1.0, float("inf")])
def test_bad_c2_is_named(prs_random, c2):
    with pytest.raises(ValueError, match=r"^c2 must be in"):
        prs_random.penalty_set(c2)


@pytest.mark.parametrize(("kwargs", "error", "pattern"), [
    ({"ridge": -1.0}, ValueError, "^ridge must be in"),
    ({"n_initial": 4000}, ValueError, r"^n_initial must be in \[1, 3999\]"),
    ({"n_initial": 5000}, ValueError, r"^n_initial must be in \[1, 3999\]"),
    ({"n_initial": 0}, ValueError, r"^n_initial must be in \[1, 3999\]"),
    ({"n_initial": 0.5}, TypeError, "^n_initial must be an integer"),
    ({"rank": 6}, ValueError, r"^rank must be in \[1, 4\]"),
    ({"max_iter": 0}, ValueError, r"^max_iter must be >= 1, got 0"),
])
def test_bad_arguments_are_named(random_low_rank_problem, kwargs, error, pattern):
    args = {"rank": 2} | kwargs
    with pytest.raises(error, match=pattern):
        bl.fit_prs(random_low_rank_problem.data, **args)


def test_data_must_be_preference_data():
    with pytest.raises(TypeError, match=r"^data must be a PreferenceData"):
        bl.fit_prs([[0.0]], 1)


@pytest.mark.slow
def test_penalty_set_coverage_over_six_seeds():
    problem = simulate.paper_problem(rank=3, imbalance=1)
    contained = 0
    for seed in range(10, 16):
        prs = _quiet(bl.fit_prs, problem.sample(3000, seed=seed), 3)
        contained += bool(prs.penalty_set().contains(prs.basis.to_coordinates(problem.theta)))
    assert contained <= 1
