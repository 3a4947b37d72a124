"""Posterior fits (NUTS, MAP, ADVI) on a tiny version of the paper's simulation, and the comparison table.

Tiny on purpose: d_x = 4, d_a = 4, d_s = 3 (d_φ = 6), r = 2, N = 800, so that the
whole file runs in well under a minute. The statistical checks on the full
problem (SBC, coverage, R-hat/ESS at N = 3000) are in test_bayes_slow.py.
"""

from __future__ import annotations

import dataclasses
import json
import pickle

import arviz as az
import numpy as np
import pymc as pm
import pytest
import xarray as xr
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


def identified_coordinates(post) -> np.ndarray:
    """Which coordinates e_i of θ_rtv lie in range(ZᵀZ), Z the design built row by row from Θ = x Δφᵀ."""
    data = post.data
    z = np.stack([post.basis.to_coordinates(np.outer(x, d)) for x, d in
                  zip(data.contexts, data.differences, strict=True)])
    vals, vecs = np.linalg.eigh(z.T @ z)
    q = vecs[:, vals > 1e-10 * vals.max()]
    return np.linalg.norm(np.eye(post.k) - q @ q.T, axis=0) <= 1e-6


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
    # Typed attributes: the rank is the int 2, not the string "2".
    assert nuts.tree.attrs["rank"] == RANK and type(nuts.tree.attrs["rank"]) is int


def test_arviz_diagnoses_theta_rtv(nuts):
    summary = az.summary(nuts.tree, var_names=[D.THETA_RTV])
    assert len(summary) == nuts.k
    assert summary.index[0] == "theta_rtv[11[0,0]]"
    assert {"r_hat", "ess_bulk", "ess_tail"} <= set(summary.columns)
    # The package's summary keeps the identified coordinates; the notes count the rest.
    left_out = nuts.k - len(nuts.summary().table)
    assert 0 < left_out < nuts.k and f"{left_out} of {nuts.k} coordinates" in " ".join(nuts.summary().notes)


def test_nuts_diagnostics(nuts):
    d = nuts.diagnostics
    assert isinstance(d, bl.results.Diagnostics)
    assert nuts.method == "nuts" and d.method == "nuts-pymc" and d.seconds > 0
    assert nuts.settings["nuts"]["sampler"] == "pymc"
    assert d.n_iter == 300 and type(d.n_iter) is int  # draws per chain
    assert d.converged == (not d.warnings)
    status = bl.results.FitStatus
    assert d.status is (status.CONVERGED if d.converged else status.SAMPLER_WARNINGS)
    assert "2 chains" in d.message and "300 draws" in d.message
    assert d.divergences == 0
    assert d.mean_tree_depth is not None and d.mean_tree_depth >= 1
    # 600 draws of a 2-chain run that started at the frequentist fit: mixed, not perfect.
    assert d.max_rhat < 1.05
    assert 100 < d.min_ess_bulk
    # The diagnostics are the extremes over every entry of Θ and θ_rtv, so over the summary's rows too.
    table = nuts.summary().table
    assert d.max_rhat >= table.r_hat.max() and d.min_ess_bulk <= table.ess_bulk.min()
    assert d.min_ess_tail <= table.ess_tail.min()
    every = az.summary(nuts.tree, var_names=[D.THETA_RTV], kind="diagnostics")
    assert len(every) == nuts.k and d.max_rhat >= every.r_hat.max() and d.min_ess_bulk <= every.ess_bulk.min()


def test_posterior_mean_recovers_theta(nuts, problem):
    truth, _, low_rank = problem
    err = np.linalg.norm(nuts.theta - truth.theta)
    assert err <= 1.25 * np.linalg.norm(low_rank.theta - truth.theta)
    # The truth is within the posterior's spread on the identified coordinates.
    truth_rtv = nuts.basis.to_coordinates(truth.theta)
    cs = nuts.calibrated_set(0.99)
    assert cs.contains(truth_rtv)


def test_moments_and_credible_sets(nuts):
    j = 600
    assert nuts.rtv_draws.shape == (j, nuts.k) and nuts.theta_draws.shape[0] == j
    np.testing.assert_allclose(nuts.estimate, nuts.rtv_draws.mean(0))
    np.testing.assert_allclose(nuts.rtv_covariance, np.cov(nuts.rtv_draws, rowvar=False))
    ell = nuts.calibrated_set(0.9, "credible")
    assert isinstance(ell, bl.EllipsoidSet) and ell.kind == "credible"
    assert ell.effective_dim == nuts.k_eff < nuts.k  # state features never reach the likelihood
    full = nuts.calibrated_set(0.9, "credible", identified=False)
    assert full.effective_dim == nuts.k and full.radius > ell.radius
    ds = nuts.calibrated_set(0.9, "draws")
    assert isinstance(ds, bl.DrawsSet) and ds.draws.shape[0] == 540
    assert isinstance(nuts.calibrated_set(0.9, "quantile"), bl.QuantileSet)
    with pytest.raises(ValueError, match="kind"):
        nuts.calibrated_set(0.9, "box")
    with pytest.raises(ValueError, match="kind"):
        nuts.calibrated_set(0.9, "ellipsoid")  # the old name of "credible"


def test_sandwich_set_uses_the_fisher_information_at_the_posterior_mean(nuts):
    import statsmodels.api as sm

    data = nuts.data
    z = nuts.basis.transform(data.contexts, data.differences)
    eta = np.einsum("ti,ij,tj->t", data.contexts, nuts.theta, data.differences)
    # statsmodels' Binomial GLM, with Θ̄'s part outside the reduced subspace as an offset.
    glm = sm.GLM(data.labels.astype(float), z, family=sm.families.Binomial(), offset=eta - z @ nuts.estimate)
    np.testing.assert_allclose(nuts.information(), -glm.hessian(nuts.estimate), rtol=1e-8, atol=1e-8)
    sandwich = nuts.calibrated_set(0.9, "sandwich")
    credible = nuts.calibrated_set(0.9)
    assert sandwich.kind == "sandwich" and sandwich.effective_dim == credible.effective_dim
    np.testing.assert_allclose(sandwich.center, credible.center)
    assert not np.allclose(sandwich.precision, credible.precision)
    # The same set as credible_ellipsoid with F = information() (Σ F Σ), built by hand.
    by_hand = bb.credible_ellipsoid(nuts.rtv_draws, nuts.basis, 0.9, directions=nuts.directions,
                                    information=-glm.hessian(nuts.estimate))
    np.testing.assert_allclose(sandwich.precision, by_hand.precision, rtol=1e-6, atol=1e-8)
    # The covariance= argument is gone: the sandwich is a kind of its own.
    with pytest.raises(TypeError, match="covariance"):
        nuts.calibrated_set(0.9, covariance="sandwich")
    with pytest.raises(ValueError, match="kind='sandwich'"):
        bb.credible_set(nuts.rtv_draws, nuts.basis, 0.9, "draws", information=nuts.information())


def test_sets_go_through_the_same_solver(nuts, problem):
    truth, _, _ = problem
    pop = truth.population(60, seed=4)
    for kind, objective in (("credible", "exact"), ("credible", "relaxed"), ("sandwich", "exact"),
                            ("draws", "exact"), ("quantile", "relaxed")):
        policy = bl.pessimistic_policy(nuts.calibrated_set(0.9, kind), pop, objective=objective)
        assert policy.pessimistic_value >= -1e-9
        assert 0 <= bl.suboptimality(policy, truth, pop) <= np.ptp(truth.rewards(pop)) + 1e-9
    policy = bl.pessimistic_policy(nuts.penalty_set(), pop, objective="exact")
    assert 0 <= bl.suboptimality(policy, truth, pop) <= np.ptp(truth.rewards(pop)) + 1e-9
    with pytest.raises(TypeError, match="convex"):
        bl.pessimistic_policy(nuts.calibrated_set(0.9, "quantile"), pop, objective="exact")


def test_map_from_frequentist_start_recovers_theta_like_fgd(problem):
    truth, data, low_rank = problem
    post = bb.fit_posterior(data, RANK, method="map", start=low_rank, progressbar=False)
    assert post.method == "map" and post.rtv_draws.shape == (1, post.k)
    err_map = np.linalg.norm(post.theta - truth.theta)
    err_fgd = np.linalg.norm(low_rank.theta - truth.theta)
    assert err_map <= 1.1 * err_fgd
    assert np.linalg.norm(post.theta) > 0.5 * np.linalg.norm(low_rank.theta)  # not the saddle at 0
    for kind in post.calibrated_kinds:
        with pytest.raises(ValueError, match="method='map'"):
            post.calibrated_set(0.9, kind)
    # The optimiser's own account, from find_MAP's optimizer_result.
    d = post.diagnostics
    result = post.tree["optimizer_result"]
    assert d.method == "map" and d.converged is bool(result["success"].values) is True
    assert d.n_iter == int(result["nit"].values) > 0 and type(d.n_iter) is int
    assert d.status is bl.results.FitStatus.CONVERGED and d.message == str(result["message"].values)
    assert d.divergences is None and np.isnan(d.max_rhat)
    # A point estimate: estimates only, and a note that says so.
    summary = post.summary()
    identified = identified_coordinates(post)
    np.testing.assert_allclose(summary.table.estimate, post.estimate[identified])
    assert summary.table[["std_err", "lower", "upper"]].isna().all().all()
    assert "MAP is a point estimate: no intervals" in " ".join(summary.notes)
    assert summary.title == "Posterior (MAP, L-BFGS-B)"
    np.testing.assert_array_equal(post.penalty_set().center, post.estimate)


@pytest.mark.parametrize("vi_method", ["advi", pytest.param("fullrank_advi", marks=pytest.mark.slow)])
def test_vi_gives_draws_near_the_fit(problem, vi_method):
    truth, data, low_rank = problem
    vi = {"method": vi_method, "draws": 400, "iterations": 2000}
    post = bb.fit_posterior(data, RANK, method="vi", vi=vi, start=low_rank, progressbar=False, random_seed=2)
    assert post.rtv_draws.shape == (400, post.k)
    assert post.diagnostics.method == f"vi-{vi_method}" and np.isnan(post.diagnostics.max_rhat)
    assert post.diagnostics.n_iter == 400 and post.diagnostics.converged
    assert post.settings["vi"] == {**vi, "learning_rate": 0.01}
    assert "nuts" not in post.settings and np.isfinite(post.tree.attrs["final_loss"])
    err = np.linalg.norm(post.theta - truth.theta)
    assert err <= 1.5 * np.linalg.norm(low_rank.theta - truth.theta)
    assert isinstance(post.calibrated_set(0.9), bl.EllipsoidSet)
    summary = post.summary()
    assert summary.title == f"Posterior (VI, {vi_method})" and summary.header["draws"] == 400
    assert (summary.table.lower < summary.table.estimate).all() and summary.table.r_hat.isna().all()


def test_sampler_warning_names_what_to_try(problem):
    _, data, low_rank = problem
    with pytest.warns(bl.SamplerWarning) as caught:
        post = bb.fit_posterior(data, RANK, nuts={"draws": 30, "tune": 30, "chains": 2, "cores": 1,
                                                  "sampler": "pymc"}, start=low_rank, progressbar=False)
    messages = " ".join(str(w.message) for w in caught)
    # 30 draws of 2 chains: too few for the ESS bound, and each warning says what to try.
    assert "ESS" in messages and "draw more" in messages
    # The diagnostics hold the same messages, and the fit is not called converged.
    d = post.diagnostics
    assert not d.converged and d.status is bl.results.FitStatus.SAMPLER_WARNINGS
    sampler_warnings = [str(w.message) for w in caught if issubclass(w.category, bl.SamplerWarning)]
    assert [f"fit_posterior: {m}" for m in d.warnings] == sampler_warnings
    assert set(d.warnings) <= set(post.summary().notes)


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
    (dict(nuts={"draws": 0}), ValueError, r"nuts\.draws"),
    (dict(nuts={"chains": 0}), ValueError, r"nuts\.chains"),
    (dict(nuts={"tune": -1}), ValueError, r"nuts\.tune"),
    (dict(nuts={"cores": 0}), ValueError, r"nuts\.cores"),
    (dict(nuts={"target_accept": 1.0}), ValueError, r"nuts\.target_accept"),
    (dict(nuts={"sampler": "stan"}), ValueError, r"nuts\.sampler"),
    (dict(nuts={"init_jitter": -0.1}), ValueError, r"nuts\.init_jitter"),
    (dict(nuts={"rhat_max": 0.9}), ValueError, r"nuts\.rhat_max"),
    (dict(nuts={"draws": 1.5}), TypeError, r"nuts\.draws"),
    (dict(vi={"method": "svgd"}), ValueError, r"vi\.method"),
    (dict(vi={"iterations": 0}), ValueError, r"vi\.iterations"),
    (dict(vi={"learning_rate": 0.0}), ValueError, r"vi\.learning_rate"),
    (dict(vi={"draws": 0}), ValueError, r"vi\.draws"),
    (dict(prior={"scale": 0.0}), ValueError, r"prior\.scale"),
    (dict(prior={"balance": -1.0}), ValueError, r"prior\.balance"),
    (dict(prior={"hyper": 1}), TypeError, r"prior\.hyper"),
    (dict(nuts="fast"), TypeError, "nuts must be a NUTS"),
    (dict(ridge=-1.0), ValueError, "ridge"),
    (dict(random_seed=-1), ValueError, "random_seed"),
    (dict(rank=9), ValueError, "rank"),
    (dict(basis="basis"), TypeError, "basis"),
    (dict(start="fit"), TypeError, "start"),
    (dict(progressbar="yes"), TypeError, "progressbar"),
])
def test_bad_arguments(problem, kwargs, exc, name):
    _, data, low_rank = problem
    args = {"rank": RANK, "start": low_rank, **kwargs}
    with pytest.raises(exc, match=name):
        bb.fit_posterior(data, args.pop("rank"), **args)


def test_old_keyword_arguments_are_gone(problem):
    _, data, low_rank = problem
    for old in ({"draws": 10}, {"nuts_sampler": "pymc"}, {"initial": low_rank}, {"reference": None},
                {"prior_scale": 1.0}, {"vi_method": "advi"}, {"model_kwargs": {}}):
        with pytest.raises(TypeError, match=next(iter(old))):
            bb.fit_posterior(data, RANK, **old)


def test_start_and_basis_must_match(problem):
    _, data, low_rank = problem
    with pytest.raises(ValueError, match="start"):
        bb.fit_posterior(data, 1, start=low_rank)
    with pytest.raises(ValueError, match="basis"):
        bb.fit_posterior(data, RANK, start=low_rank, basis=bl.rtv_basis(low_rank.theta, 1))


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
    post = short_fit(problem, nuts={"draws": 300, "tune": 300, "chains": 2, "sampler": sampler},
                     random_seed=2)
    assert post.diagnostics.method == f"nuts-{sampler}" and post.diagnostics.divergences == 0
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


# ------------------------------------------------------------------- settings groups and the Fit shape


def test_settings_groups_accept_instances_dicts_and_none():
    from bayes_loco.bayes.fit import settings_group

    assert settings_group(None, bb.NUTS, "nuts") == bb.NUTS()
    given = bb.NUTS(draws=10, sampler="pymc")
    assert settings_group(given, bb.NUTS, "nuts") is given
    assert settings_group({"draws": 10, "sampler": "pymc"}, bb.NUTS, "nuts") == given
    assert settings_group({"scale": 2, "hyper": True}, bb.Prior, "prior") == bb.Prior(2.0, True)
    assert settings_group({"method": "fullrank_advi"}, bb.VI, "vi").method == "fullrank_advi"
    # Values are normalised to plain Python types (JSON-able settings).
    nuts = bb.NUTS(draws=np.int64(12), target_accept=np.float32(0.5))
    assert type(nuts.draws) is int and type(nuts.target_accept) is float
    assert type(bb.Prior(scale=2).scale) is float
    assert (bb.Prior().scale, bb.Prior().hyper, bb.Prior().balance) == (1.0, False, 0.0)
    assert dataclasses.astuple(bb.NUTS()) == (1000, 1000, 4, None, None, 0.9, 0.01, 1.01, 400.0)
    assert dataclasses.astuple(bb.VI()) == ("advi", 30000, 0.01, 1000)
    with pytest.raises(dataclasses.FrozenInstanceError):
        nuts.draws = 5


@pytest.mark.parametrize(("group", "value", "bad"), [
    ("nuts", {"draw": 10}, "'draw'"), ("prior", {"prior_scale": 2.0}, "'prior_scale'"),
    ("vi", {"vi_method": "advi", "draws": 5}, "'vi_method'")])
def test_unknown_setting_names_group_key_and_known_ones(problem, group, value, bad):
    _, data, low_rank = problem
    cls = {"nuts": bb.NUTS, "prior": bb.Prior, "vi": bb.VI}[group]
    with pytest.raises(ValueError) as err:
        bb.fit_posterior(data, RANK, start=low_rank, **{group: value})
    message = str(err.value)
    assert message.startswith(f"{group} has no setting") and bad in message
    assert all(f.name in message for f in dataclasses.fields(cls))


def test_build_model_takes_the_prior_group(problem):
    _, data, _ = problem
    with pytest.raises(ValueError, match=r"prior has no setting 'sigma'"):
        bb.build_model(data, RANK, prior={"sigma": 1.0})
    with pytest.raises(TypeError, match="prior must be a Prior"):
        bb.build_model(data, RANK, prior=1.0)


def test_sampler_is_resolved_to_the_one_that_runs(monkeypatch):
    from bayes_loco.bayes import fit as fit_module

    assert fit_module._resolve_sampler(bb.NUTS()).sampler in bb.available_samplers()
    monkeypatch.setattr(fit_module, "available_samplers", lambda: ("pymc",))
    assert fit_module._resolve_sampler(bb.NUTS()).sampler == "pymc"
    with pytest.raises(ValueError, match=r"nuts\.sampler='numpyro' is not installed"):
        fit_module._resolve_sampler(bb.NUTS(sampler="numpyro"))
    monkeypatch.setattr(fit_module, "available_samplers", lambda: ("pymc", "nutpie"))
    assert fit_module._resolve_sampler(bb.NUTS()).sampler == "nutpie"


def test_settings_are_recorded_typed_and_json_able(nuts):
    settings = nuts.settings
    assert list(settings) == ["rank", "method", "prior", "ridge", "random_seed", "nuts"]
    assert settings["nuts"] == {"draws": 300, "tune": 300, "chains": 2, "cores": 1, "sampler": "pymc",
                                "target_accept": 0.9, "init_jitter": 0.01, "rhat_max": 1.01, "ess_min": 400.0}
    assert settings["prior"] == {"scale": 1.0, "hyper": False, "balance": 0.0}
    assert json.loads(json.dumps(settings)) == settings
    assert type(settings["rank"]) is int and type(settings["random_seed"]) is int
    assert settings["prior"]["hyper"] is False and type(settings["ridge"]) is float
    attrs = nuts.tree.attrs
    assert attrs["rank"] == 2 and type(attrs["rank"]) is int
    assert attrs["method"] == "nuts" and type(attrs["random_seed"]) is int
    recorded = json.loads(attrs["settings"])
    assert recorded == settings and recorded["nuts"] == settings["nuts"]
    assert type(recorded["nuts"]["draws"]) is int and recorded["prior"]["hyper"] is False


def test_the_tree_writes_to_netcdf_as_arviz_users_expect(nuts, tmp_path):
    path = tmp_path / "tree.nc"
    nuts.tree.to_netcdf(path, engine="h5netcdf")
    back = xr.open_datatree(path, engine="h5netcdf")
    assert back.attrs["rank"] == 2 and json.loads(back.attrs["settings"]) == nuts.settings
    np.testing.assert_array_equal(back["posterior"]["theta_rtv"].values,
                                  nuts.tree["posterior"]["theta_rtv"].values)
    back.close()


def test_posterior_fields_are_plain_data():
    names = [f.name for f in dataclasses.fields(bb.Posterior)]
    assert names == ["tree", "basis", "start", "directions", "diagnostics", "method", "data", "settings"]
    assert bb.Posterior.calibrated_kinds == ("credible", "sandwich", "draws", "quantile")
    assert not hasattr(bb.Posterior, "credible_set") and not hasattr(bb.Posterior, "theta_mean")
    assert not hasattr(bb.Posterior, "rtv_mean") and not hasattr(bb, "SamplerDiagnostics")
    assert not hasattr(bb, "compare_policies")


def test_posterior_is_a_fit(nuts):
    assert isinstance(nuts, bl.results.Fit)
    np.testing.assert_array_equal(nuts.theta, nuts.theta_draws.mean(axis=0))
    np.testing.assert_array_equal(nuts.estimate, nuts.rtv_draws.mean(axis=0))
    assert nuts.coordinates is nuts.basis and nuts.theta.shape == (nuts.data.d_x, nuts.data.d_phi)
    assert isinstance(nuts.diagnostics, bl.results.Diagnostics)


def test_penalty_set_is_the_papers_gram_ellipsoid_around_the_posterior_mean(nuts):
    data = nuts.data
    cs = nuts.penalty_set()
    assert isinstance(cs, bl.EllipsoidSet) and cs.kind == "gram" and cs.level is None
    assert cs.coordinates is nuts.basis
    np.testing.assert_array_equal(cs.center, nuts.estimate)
    # W = Σ_t z_t z_tᵀ with z_t the RTV coordinates of x_t Δφ_tᵀ, built row by row.
    gram = np.zeros((nuts.k, nuts.k))
    for x, d in zip(data.contexts, data.differences, strict=True):
        z = nuts.basis.to_coordinates(np.outer(x, d))
        gram += np.outer(z, z)
    np.testing.assert_allclose(cs.precision, gram, rtol=1e-10, atol=1e-8)
    assert cs.radius == pytest.approx(5.0 * np.sqrt(nuts.k / data.n), rel=1e-12)
    assert nuts.penalty_set(c2=2.0).radius == pytest.approx(2.0 * np.sqrt(nuts.k / data.n), rel=1e-12)
    assert cs.effective_dim == nuts.k_eff
    with pytest.raises(ValueError, match="c2"):
        nuts.penalty_set(c2=-1.0)


@pytest.mark.parametrize("kind", ["credible", "sandwich", "draws", "quantile"])
def test_calibrated_set_kind_is_the_kind_asked_for(nuts, kind):
    cs = nuts.calibrated_set(0.8, kind)
    assert cs.kind == kind and cs.level == 0.8 and cs.coordinates is nuts.basis


def test_calibrated_set_default_is_the_credible_ellipsoid(nuts):
    default, none = nuts.calibrated_set(), nuts.calibrated_set(0.9, None)
    assert default.kind == none.kind == "credible" and default.level == 0.9
    np.testing.assert_array_equal(default.precision, none.precision)
    with pytest.raises(ValueError, match="level"):
        nuts.calibrated_set(1.0)


def test_summary_of_the_identified_coordinates(nuts):
    level = 0.9
    summary = nuts.summary(level)
    assert isinstance(summary, bl.results.Summary) and summary.title == "Posterior (NUTS, pymc)"
    header = summary.header
    assert {"N", "d_x", "d_phi", "rank", "k", "k_eff", "converged"} <= set(header)
    assert (header["N"], header["d_x"], header["d_phi"]) == (nuts.data.n, nuts.data.d_x, nuts.data.d_phi)
    assert (header["rank"], header["k"], header["k_eff"]) == (RANK, nuts.k, nuts.k_eff)
    assert header["converged"] == nuts.diagnostics.converged and header["method"] == "nuts-pymc"
    assert (header["chains"], header["draws"], header["divergences"]) == (2, 300, 0)
    assert header["max R-hat"] == nuts.diagnostics.max_rhat
    table = summary.table
    identified = identified_coordinates(nuts)
    assert 0 < identified.sum() < nuts.k  # the state block is not reached
    assert table.index.name == "coordinate"
    assert list(table.index) == [label for label, keep in zip(nuts.basis.labels(), identified, strict=True)
                                 if keep]
    assert list(table.columns) == ["estimate", "std_err", "lower", "upper", "ess_bulk", "ess_tail", "r_hat"]
    draws = nuts.rtv_draws[:, identified]
    np.testing.assert_allclose(table.estimate, draws.mean(axis=0), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(table.std_err, draws.std(axis=0, ddof=1), rtol=1e-3)
    assert (table.lower < table.estimate).all() and (table.estimate < table.upper).all()
    # Equal-tailed intervals: the empirical quantiles of the draws.
    for column, q in (("lower", (1 - level) / 2), ("upper", (1 + level) / 2)):
        np.testing.assert_allclose(table[column], np.quantile(draws, q, axis=0), rtol=1e-10, atol=1e-12)
    assert (table.ess_bulk > 0).all() and (table.r_hat < 1.05).all()
    wide = nuts.summary(0.99).table
    assert (wide.lower <= table.lower).all() and (wide.upper >= table.upper).all()
    text = str(summary)
    assert "k_eff" in text and "Posterior (NUTS, pymc)" in text and table.index[0] in text
    left_out = nuts.k - identified.sum()
    assert any(f"{left_out} of {nuts.k} coordinates" in note for note in summary.notes)
    with pytest.raises(ValueError, match="level"):
        nuts.summary(0.0)


def test_posterior_pickles_and_rebuilds_its_model(nuts):
    nuts.rtv_draws  # noqa: B018 - fill the cache
    state = nuts.__getstate__()
    assert "model" not in state and "rtv_draws" not in state and "theta_draws" not in state
    assert set(state) == {f.name for f in dataclasses.fields(nuts)}
    back = pickle.loads(pickle.dumps(nuts))
    np.testing.assert_array_equal(back.rtv_draws, nuts.rtv_draws)
    np.testing.assert_array_equal(back.directions, nuts.directions)
    assert back.settings == nuts.settings and back.diagnostics == nuts.diagnostics
    assert isinstance(back.model, pm.Model) and back.model is back.model  # cached
    point = {D.LEFT: np.ones((nuts.data.d_x, RANK)), D.RIGHT: np.full((nuts.data.d_phi, RANK), 0.5)}
    assert back.model.compile_logp()(point) == pytest.approx(nuts.model.compile_logp()(point), rel=1e-12)
    assert {v.name for v in back.model.free_RVs} == {D.LEFT, D.RIGHT}


def test_model_is_the_fitted_one_and_is_rebuilt_with_the_prior(problem):
    _, data, low_rank = problem
    prior = {"scale": 0.5, "hyper": False, "balance": 1.0}
    post = bb.fit_posterior(data, RANK, method="map", prior=prior, start=low_rank, progressbar=False)
    assert post.settings["prior"] == prior and "nuts" not in post.settings and "vi" not in post.settings
    fitted = post.model
    assert D.BALANCE in fitted.named_vars
    back = pickle.loads(pickle.dumps(post))
    assert back.model is not fitted and D.BALANCE in back.model.named_vars
    rng = np.random.default_rng(0)
    point = {D.LEFT: rng.standard_normal((data.d_x, RANK)), D.RIGHT: rng.standard_normal((data.d_phi, RANK))}
    expected = bb.build_model(data, RANK, prior=bb.Prior(**prior)).compile_logp()(point)
    assert back.model.compile_logp()(point) == pytest.approx(expected, rel=1e-12)
    assert fitted.compile_logp()(point) == pytest.approx(expected, rel=1e-12)
    # The MAP estimate moved with the prior: a stronger prior shrinks it.
    free = bb.fit_posterior(data, RANK, method="map", start=low_rank, progressbar=False)
    assert np.linalg.norm(post.theta) < np.linalg.norm(free.theta)
