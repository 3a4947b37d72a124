"""Posterior fits (NUTS, MAP, ADVI) on a tiny version of the paper's simulation, and the comparison table.

Tiny on purpose: d_x = 4, d_a = 4, d_s = 3 (d_φ = 6), r = 2, N = 800, so that the
whole file runs in well under a minute. The statistical checks on the full
problem (SBC, coverage, R-hat/ESS at N = 3000) are in test_bayes_slow.py.
"""

from __future__ import annotations

import arviz as az
import numpy as np
import pytest
from conftest import BAYES_RANK as RANK
from conftest import bayes_short_fit

import bayes_loco as bl
from bayes_loco import bayes as bb
from bayes_loco.bayes import dims as D


@pytest.fixture(scope="module")
def problem(bayes_problem):
    return bayes_problem


@pytest.fixture(scope="module")
def nuts(bayes_nuts):
    return bayes_nuts


def short_fit(problem, **kwargs):
    return bayes_short_fit(problem, **kwargs)


def test_tree_has_identified_quantities_with_named_dims(nuts, problem):
    _, data, _ = problem
    post = nuts.tree["posterior"]
    assert {"posterior", "sample_stats", "observed_data"} <= set(nuts.tree.children)
    assert post[D.THETA].dims == ("chain", "draw", D.CONTEXT, D.FEATURE)
    assert post[D.THETA_RTV].dims == ("chain", "draw", D.RTV_COORD)
    assert post.sizes["chain"] == 2 and post.sizes["draw"] == 300
    assert post.sizes[D.RTV_COORD] == nuts.k == (data.d_x + data.d_phi) * RANK - RANK**2
    theta = post[D.THETA].values
    np.testing.assert_allclose(theta, np.einsum("cdir,cdjr->cdij", post[D.LEFT].values, post[D.RIGHT].values),
                               atol=1e-10)
    np.testing.assert_allclose(post[D.THETA_RTV].values, nuts.basis.to_coordinates(theta), atol=1e-10)
    assert nuts.tree.attrs["bayes_loco_version"] == bl.__version__
    assert nuts.tree.attrs["rank"] == str(RANK)


def test_arviz_diagnoses_theta_rtv(nuts):
    summary = az.summary(nuts.tree, var_names=[D.THETA_RTV])
    assert len(summary) == nuts.k
    assert summary.index[0] == "theta_rtv[11[0,0]]"
    assert {"r_hat", "ess_bulk", "ess_tail"} <= set(summary.columns)
    assert len(nuts.summary()) == nuts.k


def test_nuts_diagnostics(nuts):
    d = nuts.diagnostics
    assert d.method == "nuts" and d.sampler == "pymc" and d.seconds > 0
    assert d.divergences == 0
    assert d.mean_tree_depth is not None and d.mean_tree_depth >= 1
    # 600 draws of a 2-chain run that started at the frequentist fit: mixed, not perfect.
    assert d.max_rhat < 1.05
    assert 100 < d.min_ess_bulk
    assert d.summary is not None and len(d.summary) == nuts.k


def test_posterior_mean_recovers_theta(nuts, problem):
    truth, _, low_rank = problem
    err = np.linalg.norm(nuts.theta_mean - truth.theta)
    assert err <= 1.25 * np.linalg.norm(low_rank.theta - truth.theta)
    # The truth is within the posterior's spread on the identified coordinates.
    truth_rtv = nuts.basis.to_coordinates(truth.theta)
    cs = nuts.credible_set(0.99)
    assert cs.contains(truth_rtv)


def test_moments_and_credible_sets(nuts):
    j = 600
    assert nuts.rtv_draws.shape == (j, nuts.k) and nuts.theta_draws.shape[0] == j
    np.testing.assert_allclose(nuts.rtv_mean, nuts.rtv_draws.mean(0))
    np.testing.assert_allclose(nuts.rtv_covariance, np.cov(nuts.rtv_draws, rowvar=False))
    ell = nuts.credible_set(0.9, "ellipsoid")
    assert isinstance(ell, bl.EllipsoidSet) and ell.kind == "credible"
    assert ell.effective_dim == nuts.k_eff < nuts.k  # state features never reach the likelihood
    full = nuts.credible_set(0.9, "ellipsoid", identified=False)
    assert full.effective_dim == nuts.k and full.radius > ell.radius
    ds = nuts.credible_set(0.9, "draws")
    assert isinstance(ds, bl.DrawsSet) and ds.draws.shape[0] == 540
    assert isinstance(nuts.credible_set(0.9, "quantile"), bl.QuantileSet)
    with pytest.raises(ValueError, match="kind"):
        nuts.credible_set(0.9, "box")


def test_sandwich_set_uses_the_fisher_information_at_the_posterior_mean(nuts):
    import statsmodels.api as sm

    data = nuts.data
    z = nuts.basis.transform(data.contexts, data.differences)
    eta = np.einsum("ti,ij,tj->t", data.contexts, nuts.theta_mean, data.differences)
    # statsmodels' Binomial GLM, with Θ̄'s part outside the reduced subspace as an offset.
    glm = sm.GLM(data.labels.astype(float), z, family=sm.families.Binomial(), offset=eta - z @ nuts.rtv_mean)
    np.testing.assert_allclose(nuts.information(), -glm.hessian(nuts.rtv_mean), rtol=1e-8, atol=1e-8)
    sandwich = nuts.credible_set(0.9, covariance="sandwich")
    credible = nuts.credible_set(0.9)
    assert sandwich.kind == "sandwich" and sandwich.effective_dim == credible.effective_dim
    np.testing.assert_allclose(sandwich.center, credible.center)
    assert not np.allclose(sandwich.precision, credible.precision)
    with pytest.raises(ValueError, match="covariance"):
        nuts.credible_set(0.9, covariance="robust")
    with pytest.raises(ValueError, match="kind='ellipsoid'"):
        nuts.credible_set(0.9, "draws", covariance="sandwich")


def test_sets_go_through_the_same_solver(nuts, problem):
    truth, _, _ = problem
    pop = truth.population(60, seed=4)
    for kind, objective in (("ellipsoid", "exact"), ("ellipsoid", "relaxed"), ("draws", "exact"),
                            ("quantile", "relaxed")):
        policy = bl.pessimistic_policy(nuts.credible_set(0.9, kind), pop, objective=objective)
        assert policy.pessimistic_value >= -1e-9
        assert 0 <= bl.suboptimality(policy, truth, pop) <= np.ptp(truth.rewards(pop)) + 1e-9
    with pytest.raises(TypeError, match="convex"):
        bl.pessimistic_policy(nuts.credible_set(0.9, "quantile"), pop, objective="exact")


def test_map_from_frequentist_start_recovers_theta_like_fgd(problem):
    truth, data, low_rank = problem
    post = bb.fit_posterior(data, RANK, method="map", initial=low_rank, progressbar=False)
    assert post.method == "map" and post.rtv_draws.shape == (1, post.k)
    err_map = np.linalg.norm(post.theta_mean - truth.theta)
    err_fgd = np.linalg.norm(low_rank.theta - truth.theta)
    assert err_map <= 1.1 * err_fgd
    assert np.linalg.norm(post.theta_mean) > 0.5 * np.linalg.norm(low_rank.theta)  # not the saddle at 0
    with pytest.raises(ValueError, match="method='map'"):
        post.credible_set(0.9)


@pytest.mark.parametrize("vi_method", ["advi", pytest.param("fullrank_advi", marks=pytest.mark.slow)])
def test_vi_gives_draws_near_the_fit(problem, vi_method):
    truth, data, low_rank = problem
    post = bb.fit_posterior(data, RANK, method="vi", vi_method=vi_method, draws=400, vi_iterations=2000,
                            initial=low_rank, progressbar=False, random_seed=2)
    assert post.rtv_draws.shape == (400, post.k)
    assert post.diagnostics.sampler == vi_method and np.isnan(post.diagnostics.max_rhat)
    err = np.linalg.norm(post.theta_mean - truth.theta)
    assert err <= 1.5 * np.linalg.norm(low_rank.theta - truth.theta)
    assert isinstance(post.credible_set(0.9), bl.EllipsoidSet)


def test_sampler_warning_names_what_to_try(problem):
    _, data, low_rank = problem
    with pytest.warns(bl.SamplerWarning) as caught:
        bb.fit_posterior(data, RANK, draws=30, tune=30, chains=2, cores=1, nuts_sampler="pymc",
                         initial=low_rank, progressbar=False)
    messages = " ".join(str(w.message) for w in caught)
    # 30 draws of 2 chains: too few for the ESS bound, and each warning says what to try.
    assert "ESS" in messages and "draw more" in messages


def test_start_jitter_is_small_and_seeded():
    from bayes_loco.bayes.fit import _initvals

    u0, v0 = np.ones((3, 2)), 2 * np.ones((4, 2))
    starts = _initvals(u0, v0, 3, 0.01, np.random.default_rng(0), per_chain=True)
    assert len(starts) == 3
    for s in starts:
        assert 0 < np.abs(s[D.LEFT] - u0).max() < 0.1 and 0 < np.abs(s[D.RIGHT] - v0).max() < 0.2
    single = _initvals(u0, v0, 3, 0.01, np.random.default_rng(0), per_chain=False)
    np.testing.assert_array_equal(single[D.LEFT], starts[0][D.LEFT])


@pytest.mark.parametrize(("kwargs", "exc", "name"), [
    (dict(method="gibbs"), ValueError, "method"),
    (dict(draws=0), ValueError, "draws"),
    (dict(chains=0), ValueError, "chains"),
    (dict(target_accept=1.0), ValueError, "target_accept"),
    (dict(nuts_sampler="stan"), ValueError, "nuts_sampler"),
    (dict(vi_method="svgd"), ValueError, "vi_method"),
    (dict(rank=9), ValueError, "rank"),
    (dict(reference="basis"), TypeError, "reference"),
    (dict(initial="fit"), TypeError, "initial"),
    (dict(progressbar="yes"), TypeError, "progressbar"),
])
def test_bad_arguments(problem, kwargs, exc, name):
    _, data, low_rank = problem
    args = {"rank": RANK, "initial": low_rank, **kwargs}
    with pytest.raises(exc, match=name):
        bb.fit_posterior(data, args.pop("rank"), **args)


def test_initial_and_reference_must_match(problem):
    _, data, low_rank = problem
    with pytest.raises(ValueError, match="initial"):
        bb.fit_posterior(data, 1, initial=low_rank)
    with pytest.raises(ValueError, match="reference"):
        bb.fit_posterior(data, RANK, initial=low_rank, reference=bl.rtv_basis(low_rank.theta, 1))


def test_available_samplers():
    found = bb.available_samplers()
    assert found[0] == "pymc" and set(found) <= set(bb.fit.NUTS_SAMPLERS)


@pytest.mark.parametrize("sampler", [
    # numba compilation alone takes ~30 s
    pytest.param("nutpie", marks=[pytest.mark.slow, pytest.mark.skipif(
        "nutpie" not in bb.available_samplers(), reason="nutpie not installed")]),
    pytest.param("numpyro", marks=pytest.mark.skipif(
        "numpyro" not in bb.available_samplers(), reason="numpyro/jax not installed")),
])
def test_external_sampler_agrees_with_pymc_nuts(nuts, problem, sampler):
    post = short_fit(problem, draws=300, tune=300, chains=2, nuts_sampler=sampler, random_seed=2)
    assert post.diagnostics.sampler == sampler and post.diagnostics.divergences == 0
    assert post.diagnostics.max_rhat < 1.05
    assert post.tree["posterior"][D.THETA_RTV].sizes == nuts.tree["posterior"][D.THETA_RTV].sizes

    def moments(fit):
        draws = fit.tree["posterior"][D.THETA_RTV].stack(sample=("chain", "draw")).transpose("sample", ...)
        return draws.mean("sample").to_numpy(), draws.std("sample").to_numpy(), fit.diagnostics.min_ess_bulk

    (m1, s1, e1), (m2, s2, e2) = moments(nuts), moments(post)
    z = np.abs(m1 - m2) / np.sqrt(s1**2 / e1 + s2**2 / e2)
    assert z.max() < 4.0, z  # two samplers, one posterior: means agree within their Monte Carlo error


@pytest.mark.skipif("numpyro" not in bb.available_samplers(), reason="numpyro/jax not installed")
def test_numpyro_vectorizes_chains_when_devices_are_fewer(monkeypatch):
    import jax

    monkeypatch.setattr(jax, "local_device_count", lambda: 1)
    assert bb.fit._jax_chain_method(4) == "vectorized"
    monkeypatch.setattr(jax, "local_device_count", lambda: 4)
    assert bb.fit._jax_chain_method(4) == "parallel"
