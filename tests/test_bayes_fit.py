"""Posterior fits (NUTS, MAP, ADVI) on a tiny version of the paper's simulation, and the comparison table.

Tiny on purpose: d_x = 4, d_a = 4, d_s = 3 (d_φ = 6), r = 2, N = 800, so that the
whole file runs in well under a minute. The statistical checks on the full
problem (SBC, coverage, R-hat/ESS at N = 3000) are in test_bayes_slow.py.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import logging
import os
import pickle
import re
import warnings

import arviz as az
import numpy as np
import pandas as pd
import pymc as pm
import pytest
import xarray as xr
from conftest import BAYES_RANK as RANK
from conftest import bayes_short_fit

import bayes_loco as bl
from bayes_loco import bayes as bb
from bayes_loco.bayes import dims as D
from bayes_loco.bayes.layout import predictive_indices


def setting(name: str):
    """The current value of a tuning setting (bayes_loco.config)."""
    return bl.get_config()[name]



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
    assert list(nuts.tree.children) == ["posterior", "factors", "sample_stats", "prior",
                                        "posterior_predictive", "preference_probability", "observed_data",
                                        "constant_data"]
    # Only the identified quantities: ArviZ's defaults never see U and V.
    assert set(post.data_vars) == {D.THETA, D.THETA_RTV}
    assert post[D.THETA].dims == ("chain", "draw", D.CONTEXT, D.FEATURE)
    assert post[D.THETA_RTV].dims == ("chain", "draw", D.RTV_COORD)
    assert post.sizes["chain"] == 2 and post.sizes["draw"] == 300
    assert post.sizes[D.RTV_COORD] == nuts.k == (data.d_x + data.d_phi) * RANK - RANK**2
    factors = nuts.tree[D.FACTORS]
    assert set(factors.data_vars) == {D.LEFT, D.RIGHT}
    assert factors[D.LEFT].dims == ("chain", "draw", D.CONTEXT, D.RANK)
    theta = post[D.THETA].values
    np.testing.assert_allclose(theta, np.einsum("cdir,cdjr->cdij", factors[D.LEFT].values,
                                                factors[D.RIGHT].values), atol=1e-10)
    np.testing.assert_allclose(post[D.THETA_RTV].values, nuts.basis.to_coordinates(theta), atol=1e-10)
    assert nuts.tree.attrs["bayes_loco_version"] == bl.__version__
    # Typed attributes: the rank is the int 2, not the string "2".
    assert nuts.tree.attrs["rank"] == RANK and type(nuts.tree.attrs["rank"]) is int
    attrs = nuts.tree.attrs
    assert (attrs["sampler"], attrs["chains"], attrs["draws"]) == ("pymc", 2, 300)
    assert (attrs["k"], attrs["k_eff"]) == (nuts.k, nuts.k_eff) and type(attrs["k_eff"]) is int
    assert attrs["representation"] == "NUTS draws (MCMC)"


def test_rtv_labels_name_block_and_singular_directions(nuts):
    labels = list(nuts.tree["posterior"][D.RTV_COORD].values)
    assert labels == nuts.basis.labels()
    # "11 (u0, v0)" is û_0ᵀ Θ v̂_0; rows of block 21 and columns of 12 start at r (= 2 here).
    r, dx, dp = nuts.basis.rank, nuts.basis.d_x, nuts.basis.d_phi
    assert labels[0] == "11 (u0, v0)" and labels[r * r + 1] == "12 (u0, v3)"
    assert labels[r * r + r * (dp - r)] == "21 (u2, v0)" and labels[-1] == f"21 (u{dx - 1}, v{r - 1})"
    chart = nuts.tree["constant_data"]
    np.testing.assert_array_equal(chart["rtv_block"].values, [label[:2] for label in nuts.basis.labels()])
    rotated = nuts.basis.rotate(nuts.theta_draws[:5])
    i, j = chart["rtv_context_direction"].values, chart["rtv_feature_direction"].values
    np.testing.assert_allclose(nuts.rtv_draws[:5], rotated[:, i, j], atol=1e-12)


def test_identified_coordinate_matches_the_directions(nuts):
    identified = nuts.tree["constant_data"]["rtv_identified"]
    assert identified.dtype == bool and identified.dims == (D.RTV_COORD,)
    np.testing.assert_array_equal(identified[D.RTV_COORD].values, nuts.tree["posterior"][D.RTV_COORD].values)
    np.testing.assert_array_equal(identified.values, identified_coordinates(nuts))
    np.testing.assert_array_equal(identified.values, nuts.identified)
    assert identified.values.sum() == len(nuts.summary().table) < nuts.k


def test_arviz_diagnoses_theta_rtv(nuts):
    summary = az.summary(nuts.tree, var_names=[D.THETA_RTV])
    assert len(summary) == nuts.k
    assert summary.index[0] == "theta_rtv[11 (u0, v0)]"
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
    assert d.divergences == int(nuts.tree["sample_stats"]["diverging"].sum())
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


def test_the_sandwichs_information_counts_each_row_and_squares_its_sampling_weight():
    # The score's variance: a row counted f_t is f_t comparisons; a weight w_t scales the score.
    data = bl.simulate.paper_problem(rank=2, imbalance=3, theta_kind="paper").sample(300, seed=3)
    f = 1.0 + np.arange(data.n) % 3
    w = np.random.default_rng(0).uniform(0.5, 2.0, data.n)
    counted = bl.PreferenceData(data.contexts, data.delta, data.labels, counts=f, weights=w)
    post = bb.fit_posterior(counted, 2, method="map", random_seed=0, progressbar=False)
    z = post.basis.transform(data.contexts, data.differences)
    p = 1.0 / (1.0 + np.exp(-np.einsum("ti,ij,tj->t", data.contexts, post.theta, data.differences)))
    expected = z.T @ (z * (f * w**2 * p * (1.0 - p))[:, None])
    np.testing.assert_allclose(post.information(), expected, rtol=1e-8, atol=1e-10 * np.abs(expected).max())


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


@pytest.fixture(scope="module")
def map_fit(problem):
    _, data, low_rank = problem
    return bb.fit_posterior(data, RANK, method="map", start=low_rank, progressbar=False, map={"draws": 2000})


def test_map_from_frequentist_start_recovers_theta_like_fgd(problem, map_fit):
    truth, _, low_rank = problem
    post = map_fit
    assert post.method == "map" and post.settings["map"] == {"draws": 2000}
    # The MAP is the point estimate; the tree's posterior holds its Laplace draws.
    point = post.tree["point_estimate"]
    np.testing.assert_array_equal(post.theta, point[D.THETA].values)
    np.testing.assert_array_equal(post.estimate, point[D.THETA_RTV].values)
    np.testing.assert_allclose(post.theta, np.einsum("ir,jr->ij", *(post.tree[D.FACTORS][v].values[0, 0]
                                                                     for v in (D.LEFT, D.RIGHT))), atol=1e-12)
    assert post.rtv_draws.shape == (2000, post.k)
    err_map = np.linalg.norm(post.theta - truth.theta)
    err_fgd = np.linalg.norm(low_rank.theta - truth.theta)
    assert err_map <= 1.1 * err_fgd
    assert np.linalg.norm(post.theta) > 0.5 * np.linalg.norm(low_rank.theta)  # not the saddle at 0
    # The optimiser's own account, from find_MAP's optimizer_result.
    d = post.diagnostics
    result = post.tree["optimizer_result"]
    assert d.method == "map" and d.converged is bool(result["success"].values) is True
    assert d.n_iter == int(result["nit"].values) > 0 and type(d.n_iter) is int
    assert d.status is bl.results.FitStatus.CONVERGED and d.message == str(result["message"].values)
    assert d.divergences is None and np.isnan(d.max_rhat)
    # The MAP as estimate, the Laplace approximation's sd and intervals, and a note that says so.
    summary = post.summary()
    identified = identified_coordinates(post)
    np.testing.assert_allclose(summary.table.estimate, post.estimate[identified])
    np.testing.assert_allclose(summary.table.std_err, post.rtv_draws[:, identified].std(0, ddof=1), rtol=1e-3)
    table = summary.table
    assert (table.lower < table.estimate).all() and (table.estimate < table.upper).all()
    assert "Laplace approximation" in " ".join(summary.notes) and summary.header["Laplace draws"] == 2000
    assert summary.title == "Posterior (MAP, L-BFGS-B)"
    np.testing.assert_array_equal(post.penalty_set().center, post.estimate)
    # Sets come from the Laplace draws, centred on the MAP up to Monte Carlo error.
    cs = post.calibrated_set(0.9)
    se = post.rtv_draws.std(0) / np.sqrt(2000)
    assert (np.abs(cs.center - post.estimate) < 5 * se + 1e-12).all()


def test_map_tree_summarises_to_numbers_not_nan(map_fit):
    tree = map_fit.tree
    assert list(tree.children) == ["posterior", "point_estimate", "factors", "prior", "posterior_predictive",
                                   "preference_probability", "observed_data", "constant_data",
                                   "optimizer_result"]
    assert (tree.attrs["chains"], tree.attrs["draws"], tree.attrs["sampler"]) == (1, 2000, "L-BFGS-B")
    assert "Laplace" in tree.attrs["representation"]
    summary = az.summary(tree)
    assert len(summary) == map_fit.data.d_x * map_fit.data.d_phi + map_fit.k
    # One chain (one optimisation): R-hat is undefined, everything else is a number.
    assert summary["r_hat"].isna().all()
    assert np.isfinite(summary.drop(columns="r_hat").to_numpy(float)).all()
    assert not az.diagnose(tree, show_diagnostics=False)


def _negative_log_posterior_hessian(data, u, v, scale=1.0):
    """−∇² log p(U, V | y) of the factored model (fixed prior scales, no potential), written out by hand.

    η_t = Σ_k (x_tᵀU)_k (Δφ_tᵀV)_k, so ∂η/∂U_ik = x_ti (Δφ_tᵀV)_k, ∂η/∂V_jk = Δφ_tj (x_tᵀU)_k and
    ∂²η/∂U_ik∂V_jl = x_ti Δφ_tj δ_kl; the NLL's Hessian is Σ w_t J_tJ_tᵀ + Σ (p_t − y_t) ∂²η_t, w = p(1 − p).
    """
    x, dphi, y = data.contexts, data.differences, data.labels.astype(float)
    xu, dv = x @ u, dphi @ v
    p = 1 / (1 + np.exp(-np.sum(xu * dv, axis=1)))
    jac = np.concatenate([(x[:, :, None] * dv[:, None, :]).reshape(len(y), -1),
                          (dphi[:, :, None] * xu[:, None, :]).reshape(len(y), -1)], axis=1)
    hess = jac.T @ ((p * (1 - p))[:, None] * jac)
    r = u.shape[1]
    cross = np.einsum("t,ti,tj->ij", p - y, x, dphi)  # d_x × d_φ
    block = np.einsum("ij,kl->ikjl", cross, np.eye(r)).reshape(u.size, v.size)
    hess[:u.size, u.size:] += block
    hess[u.size:, :u.size] += block.T
    return hess + np.eye(u.size + v.size) / scale**2


def test_laplace_hessian_and_draws(map_fit):
    from bayes_loco.bayes.laplace import _negative_hessian

    data = map_fit.data
    u = map_fit.tree[D.FACTORS][D.LEFT].values[0, 0]
    v = map_fit.tree[D.FACTORS][D.RIGHT].values[0, 0]
    by_hand = _negative_log_posterior_hessian(data, u, v)
    hessian = _negative_hessian(map_fit.model, {D.LEFT: u, D.RIGHT: v}, u, v)
    np.testing.assert_allclose(hessian, by_hand, rtol=1e-5, atol=1e-5 * np.abs(by_hand).max())
    # The draws: Θ* + dU V*ᵀ + U* dVᵀ with (dU, dV) ~ N(0, H⁺); θ_rtv is linear in Θ, so its covariance is
    # G H⁺ Gᵀ with G the Jacobian of θ_rtv(U V ᵀ) at the MAP.
    basis, n = map_fit.basis, u.size + v.size
    jac = np.zeros((map_fit.k, n))
    for i in range(n):
        e = np.zeros(n)
        e[i] = 1.0
        du, dv = e[:u.size].reshape(u.shape), e[u.size:].reshape(v.shape)
        jac[:, i] = basis.to_coordinates(du @ v.T + u @ dv.T)
    cov = jac @ np.linalg.pinv(by_hand, rcond=1e-10, hermitian=True) @ jac.T
    draws = map_fit.rtv_draws
    sd = np.sqrt(np.diag(cov))
    assert (np.abs(draws.mean(0) - map_fit.estimate) < 5 * sd / np.sqrt(len(draws))).all()
    np.testing.assert_allclose(draws.std(0, ddof=1), sd, rtol=0.1)


@pytest.mark.parametrize("vi_method", ["advi", pytest.param("fullrank_advi", marks=pytest.mark.slow)])
def test_vi_gives_draws_near_the_fit(problem, vi_method):
    truth, data, low_rank = problem
    vi = {"method": vi_method, "draws": 400, "iterations": 2000}
    post = bb.fit_posterior(data, RANK, method="vi", vi=vi, start=low_rank, progressbar=False, random_seed=2)
    assert post.rtv_draws.shape == (400, post.k)
    assert post.diagnostics.method == f"vi-{vi_method}" and np.isnan(post.diagnostics.max_rhat)
    assert post.diagnostics.n_iter == 2000 and post.diagnostics.converged  # ADVI's iterations
    assert post.settings["vi"] == {**vi, "learning_rate": 0.01}
    assert "nuts" not in post.settings and np.isfinite(post.tree.attrs["final_loss"])
    err = np.linalg.norm(post.theta - truth.theta)
    assert err <= 1.5 * np.linalg.norm(low_rank.theta - truth.theta)
    assert isinstance(post.calibrated_set(0.9), bl.EllipsoidSet)
    summary = post.summary()
    assert summary.title == f"Posterior (VI, {vi_method})" and summary.header["draws"] == 400
    assert (summary.table.lower < summary.table.estimate).all() and summary.table.r_hat.isna().all()
    # The tree: one chain of independent draws, said so; the loss history; no empty sample_stats.
    tree = post.tree
    assert list(tree.children) == ["posterior", "factors", "prior", "posterior_predictive",
                                   "preference_probability", "observed_data", "constant_data", "vi_loss"]
    assert tree["posterior"].sizes["chain"] == 1 and summary.header["chains"] == 1
    assert (tree.attrs["chains"], tree.attrs["draws"], tree.attrs["sampler"]) == (1, 400, vi_method)
    assert "one chain" in tree.attrs["representation"] and "one chain" in " ".join(summary.notes)
    loss = tree["vi_loss"]["loss"]
    assert loss.dims == ("iteration",) and loss.size == 2000 and np.isfinite(loss.values).all()
    assert tree.attrs["final_loss"] == pytest.approx(loss.values[-20:].mean())
    assert loss.values[-100:].mean() < loss.values[:100].mean()  # it descended
    assert np.isfinite(az.summary(tree).drop(columns="r_hat").to_numpy(float)).all()


def test_quiet_without_progressbar(problem, capfd, caplog):
    _, data, low_rank = problem
    level = logging.getLogger("pymc").level
    caplog.set_level(logging.INFO)
    post = bb.fit_posterior(data, RANK, method="vi", vi={"iterations": 200, "draws": 20}, start=low_rank,
                            progressbar=False, predictive_draws=0)
    out = capfd.readouterr()
    assert "Finished" not in out.out + out.err and "Finished" not in caplog.text
    assert logging.getLogger("pymc").level == level  # restored
    # predictive_draws=0 leaves the prior and the predictive groups out.
    assert not {"prior", "posterior_predictive", "preference_probability"} & set(post.tree.children)


def test_each_nuts_run_is_logged_at_info_as_it_starts_and_ends(problem, caplog):
    caplog.set_level(logging.INFO, logger="bayes_loco.bayes.fit")
    short_fit(problem, nuts={"draws": 60, "tune": 60, "chains": 2, "cores": 1, "sampler": "pymc",
                             "parametrization": "factored"}, predictive_draws=0, random_seed=4)
    lines = [r.getMessage() for r in caplog.records if r.name == "bayes_loco.bayes.fit"]
    assert len(lines) == 2, lines
    assert lines[0] == ("NUTS run starts: factored, target_accept 0.9, 2 × (60 + 60) with pymc; "
                        "nuts.parametrization='factored'")
    assert re.fullmatch(r"NUTS run ends after \d+ s: \d+ divergences, max R-hat \d\.\d{4}, min ESS \d+",
                        lines[1])


def test_sampler_warning_names_what_to_try(problem):
    _, data, low_rank = problem
    with pytest.warns(bl.SamplerWarning) as caught:
        post = bb.fit_posterior(data, RANK, nuts={"draws": 30, "tune": 30, "chains": 2, "cores": 1,
                                                  "sampler": "pymc"}, start=low_rank, progressbar=False)
    messages = " ".join(str(w.message) for w in caught)
    # 30 draws of 2 chains: too few for the ESS bound, and each warning says what to try.
    assert "ESS" in messages and "re-run with nuts={'draws': 60" in messages
    assert post.advice["draws"] == 60
    # It names the worst quantity, by its ArviZ label, with the value az.summary gives there.
    table = pd.concat([az.summary(post.tree, var_names=[v], kind="diagnostics", round_to="none")
                       for v in (D.THETA_RTV, D.THETA)])
    worst = table["ess_bulk"].astype(float).idxmin()
    assert f"bulk {table.loc[worst, 'ess_bulk']:.0f} at {worst}" in messages
    # The diagnostics hold the same messages, and the fit is not called converged.
    d = post.diagnostics
    assert not d.converged and d.status is bl.results.FitStatus.SAMPLER_WARNINGS
    sampler_warnings = [str(w.message) for w in caught if issubclass(w.category, bl.SamplerWarning)]
    assert [f"fit_posterior: {m}" for m in d.warnings] == sampler_warnings
    assert set(d.warnings) <= set(post.summary().notes)


def test_warnings_advise_exact_settings_from_what_ran(nuts):
    from bayes_loco.bayes.diagnostics import nuts_diagnostics

    strict = dataclasses.replace(bb.NUTS(**nuts.settings["nuts"]), ess_min=1e9, rhat_max=1.0)
    # R-hat and ESS alone: the fixture's divergences (0-2, by platform and library versions) taken out.
    tree = nuts.tree.copy()
    tree["sample_stats"]["diverging"] = tree["sample_stats"]["diverging"] & False
    diagnostics, advice = nuts_diagnostics(tree, strict, 1.0)
    assert len(diagnostics.warnings) == 2
    assert "max R-hat" in diagnostics.warnings[0] and f"at {D.THETA}" in diagnostics.warnings[0]
    # R-hat and ESS short: twice the draws and twice the tuning, written as the exact nuts= to pass.
    assert advice == {"draws": 2 * strict.draws, "tune": 2 * max(strict.tune, strict.draws)}
    assert all(f"re-run with nuts={advice}" in m for m in diagnostics.warnings)
    # Nothing that every fit already does, and no other sampler (not shown to help).
    assert not any("start" in m or "sampler" in m for m in diagnostics.warnings)


def test_divergences_in_a_named_chart_advise_its_retry_or_the_factored_model(nuts):
    from bayes_loco.bayes.diagnostics import nuts_diagnostics

    ran = dataclasses.replace(bb.NUTS(**nuts.settings["nuts"]), ess_min=0.0, rhat_max=100.0)
    assert ran.parametrization == "chart" and ran.target_accept < 0.95
    tree = nuts.tree.copy()
    stats = tree["sample_stats"]
    tree["sample_stats"]["diverging"] = (stats["diverging"] & False) | (stats["draw"] < 3)
    # geometry.advised_target gives 0.95 for a named chart where the factored model's ridge is long.
    diagnostics, advice = nuts_diagnostics(tree, ran, 1.0, 0.95)
    assert diagnostics.divergences == 3 * ran.chains
    assert advice == {"target_accept": 0.95, "draws": 2 * ran.draws}
    (message,) = diagnostics.warnings
    assert "in the chart coordinates: smaller leapfrog steps (target_accept 0.95)" in message
    assert message.endswith(f"re-run with nuts={advice}")
    # Elsewhere (a short ridge: the chart's ratio coordinates near-singular), the factored model, the
    # fixture's chart_rank dropped so that the advice can be followed as given.
    diagnostics, advice = nuts_diagnostics(tree, ran, 1.0)
    assert advice == {"parametrization": "factored", "chart_rank": None}
    assert "near-singular" in diagnostics.warnings[0]
    assert bb.NUTS(**(dataclasses.asdict(ran) | advice)).parametrization == "factored"
    # After the retry, the factored model, and the warning says the retry ran.
    retried = dataclasses.replace(ran, target_accept=0.95)
    diagnostics, advice = nuts_diagnostics(tree, retried, 1.0, 0.95)
    assert advice == {"parametrization": "factored", "chart_rank": None}
    assert "persist at target_accept 0.95" in diagnostics.warnings[0]
    # Where a fall-back ran every step, the warning says so and advises none of them again.
    factored = [dataclasses.replace(ran, parametrization="factored", chart_rank=None, target_accept=t)
                for t in (0.9, 0.95, 0.99)]
    diagnostics, advice = nuts_diagnostics(tree, ran, 1.0, tried=(ran, *factored))
    assert advice == {}
    assert "persist in each of the fall-back's 4 runs" in diagnostics.warnings[0]
    assert "re-run with" not in diagnostics.warnings[0]


def test_warning_marks_a_worst_coordinate_the_data_do_not_reach(nuts):
    from bayes_loco.bayes.diagnostics import _unidentified_note

    labels = nuts.tree["posterior"][D.RTV_COORD].values
    reached = nuts.identified
    assert "no comparison reaches" in _unidentified_note(f"theta_rtv[{labels[~reached][0]}]", nuts.tree)
    assert _unidentified_note(f"theta_rtv[{labels[reached][0]}]", nuts.tree) == ""
    assert _unidentified_note("theta[0, 0]", nuts.tree) == ""


def test_start_jitter_is_small_and_seeded():
    from bayes_loco.bayes.samplers import factor_start
    from bayes_loco.bayes.whitening import chart_start

    u0, v0 = np.ones((3, 2)), 2 * np.ones((4, 2))
    starts = [factor_start(u0, v0, 0.01, np.random.default_rng(seed)) for seed in (0, 0, 1)]
    for s in starts:
        assert 0 < np.abs(s[D.LEFT] - u0).max() < 0.1 and 0 < np.abs(s[D.RIGHT] - v0).max() < 0.2
    np.testing.assert_array_equal(starts[0][D.LEFT], starts[1][D.LEFT])
    assert not np.array_equal(starts[0][D.LEFT], starts[2][D.LEFT])
    frame = bb.chart.ChartFrame(np.eye(3), np.zeros((3, 0)), np.eye(4)[:, :3], np.eye(4)[:, 3:],
                                np.array([4.0, 1.0]), np.eye(2 * 4), np.zeros(2), np.zeros(2))
    start = chart_start(frame, 0.01, np.random.default_rng(0))
    assert 0 < np.abs(start[D.CHART_Z]).max() < 0.05
    np.testing.assert_allclose(np.exp(2 * start[D.CHART_LOG_DIAG]), [4.0, 1.0])
    assert start[D.RIGHT_NULL].shape == (1, 2) and D.LEFT_NULL not in start


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
    (dict(nuts={"parametrization": "polar"}), ValueError, r"nuts\.parametrization"),
    (dict(nuts={"blas_threads": 0}), ValueError, r"nuts\.blas_threads"),
    (dict(nuts={"backend": "cuda"}), ValueError, r"nuts\.backend"),
    (dict(nuts={"backend": "jax", "sampler": "pymc"}), ValueError, r"nuts\.backend is nutpie's"),
    (dict(nuts={"draws": 1.5}), TypeError, r"nuts\.draws"),
    (dict(vi={"method": "svgd"}), ValueError, r"vi\.method"),
    (dict(vi={"iterations": 0}), ValueError, r"vi\.iterations"),
    (dict(vi={"learning_rate": 0.0}), ValueError, r"vi\.learning_rate"),
    (dict(vi={"draws": 0}), ValueError, r"vi\.draws"),
    (dict(map={"draws": 0}), ValueError, r"map\.draws"),
    (dict(predictive_draws=-1), ValueError, "predictive_draws"),
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


def test_a_start_of_the_other_tie_model_is_refused(problem):
    """As ``fit_low_rank`` refuses an initial fit of the other tie model: the start is fitted as the
    posterior reads ties, which ``ties="davidson"``'s default start is (``test_bayes_ties``)."""
    _, data, low_rank = problem
    with pytest.raises(ValueError, match=r"^start was fitted with ties='half', this fit has "
                                         r"ties='davidson': pass fit_low_rank\(data, 2, ties='davidson'\)"):
        bb.fit_posterior(data, RANK, ties="davidson", start=low_rank, method="map")
    with pytest.warns(bl.DataWarning, match="no comparison is a tie"):  # these data have none: ν̂ = 0
        davidson = bl.fit_low_rank(data, RANK, ties="davidson")
    with pytest.raises(ValueError, match=r"^start was fitted with ties='davidson', this fit has ties='half'"):
        bb.fit_posterior(data, RANK, start=davidson, method="map")
    post = bb.fit_posterior(data, RANK, ties="davidson", start=davidson, method="map", predictive_draws=0)
    assert post.start is davidson and post.settings["ties"] == "davidson"


def test_available_samplers():
    found = bb.available_samplers()
    assert found[0] == "pymc" and set(found) <= set(bb.settings.NUTS_SAMPLERS)


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
    assert bb.samplers._jax_chain_method(4) == "vectorized"
    monkeypatch.setattr(jax, "local_device_count", lambda: 4)
    assert bb.samplers._jax_chain_method(4) == "parallel"


# ------------------------------------------------------------------- settings groups and the Fit shape


def test_settings_groups_accept_instances_dicts_and_none():
    from bayes_loco.bayes.settings import settings_group

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
    assert dataclasses.astuple(bb.NUTS()) == (1000, 1000, 4, None, None, 0.9, 0.01, 1.01, 400.0, "auto", None,
                                              1, None, None)
    assert dataclasses.astuple(bb.VI()) == ("advi", 30000, 0.01, 1000)
    assert dataclasses.astuple(bb.MAP()) == (1000,)
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


@pytest.mark.parametrize(("sampler", "blas_threads", "expected"), [
    ("nutpie", 1, 1), ("nutpie", None, "library"), ("pymc", 1, "library")])
def test_in_process_samplers_run_under_the_blas_limit(monkeypatch, sampler, blas_threads, expected):
    """nutpie's chains are threads of this process: BLAS gets nuts.blas_threads (nutpie runs through
    samplers.sample_nutpie, not pm.sample); PyMC's sampler keeps its per-process limiter."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from bayes_loco.bayes import samplers

    seen = {}

    def blas_now():
        return {info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"}

    def fake_sample(*args, **kwargs):
        seen["threads"] = blas_now()
        seen["blas_cores"] = kwargs.get("blas_cores", "auto")
        return "tree"

    monkeypatch.setattr(samplers.pm, "sample", fake_sample)
    monkeypatch.setattr(samplers, "sample_nutpie", fake_sample)
    # The suite runs with one BLAS thread (conftest.py): two here, so that a limit to one is seen.
    with threadpool_limits(2, user_api="blas"):
        library = blas_now()
        assert 2 in library
        nuts = bb.NUTS(sampler=sampler, blas_threads=blas_threads, chains=2)
        assert samplers.sample_nuts(None, nuts, lambda rng: {}, 0, False) == "tree"
        assert seen["threads"] == (library if expected == "library" else {expected})
        assert seen["blas_cores"] == "auto"
        assert blas_now() == library  # restored afterwards


def test_sampler_is_resolved_to_the_one_that_runs(monkeypatch):
    from bayes_loco.bayes import samplers

    assert samplers.resolve_sampler(bb.NUTS()).sampler in bb.available_samplers()
    monkeypatch.setattr(samplers, "available_samplers", lambda: ("pymc",))
    assert samplers.resolve_sampler(bb.NUTS()).sampler == "pymc"
    with pytest.raises(ValueError, match=r"nuts\.sampler='numpyro' is not installed"):
        samplers.resolve_sampler(bb.NUTS(sampler="numpyro"))
    refused = r"nuts\.backend is nutpie's; got backend='numba' with sampler='pymc'"
    with pytest.raises(ValueError, match=refused):
        samplers.resolve_sampler(bb.NUTS(backend="numba"))  # nutpie missing: no backend to pick
    monkeypatch.setattr(samplers, "available_samplers", lambda: ("pymc", "nutpie"))
    assert samplers.resolve_sampler(bb.NUTS()).sampler == "nutpie"


def test_nutpie_runs_over_jax_where_jax_sees_a_gpu(monkeypatch):
    from bayes_loco.bayes import samplers

    monkeypatch.setattr(samplers, "available_samplers", lambda: ("pymc", "nutpie", "numpyro"))
    monkeypatch.setattr(samplers, "jax_accelerator", lambda: True)
    resolved = samplers.resolve_sampler(bb.NUTS())
    assert (resolved.sampler, resolved.backend) == ("nutpie", "jax")
    # Below the crossover per core numba's per-chain gradients beat the GPU's one at a time.
    monkeypatch.setattr(samplers, "_usable_cores", lambda: 2)
    threshold = 2 * setting("jax_comparisons_per_core")
    assert samplers.resolve_sampler(bb.NUTS(), n=threshold).backend == "jax"
    assert samplers.resolve_sampler(bb.NUTS(), n=threshold - 1).backend == "numba"
    assert samplers.resolve_sampler(bb.NUTS(cores=1), n=threshold - 1).backend == "jax"
    assert samplers.resolve_sampler(bb.NUTS(backend="numba")).backend == "numba"
    assert samplers.resolve_sampler(bb.NUTS(sampler="numpyro")).backend is None
    assert samplers.resolve_sampler(bb.NUTS(sampler="pymc")).backend is None
    monkeypatch.setattr(samplers, "jax_accelerator", lambda: False)
    resolved = samplers.resolve_sampler(bb.NUTS())
    assert (resolved.sampler, resolved.backend) == ("nutpie", "numba")
    if importlib.util.find_spec("jax") is None:
        with pytest.raises(ValueError, match=r"nuts\.backend='jax' needs JAX"):
            samplers.resolve_sampler(bb.NUTS(backend="jax"))
    else:  # a backend the user names is kept, whatever the size
        assert samplers.resolve_sampler(bb.NUTS(backend="jax"), n=10).backend == "jax"


def test_reads_distinct_rows_except_where_jax_runs_on_an_accelerator(monkeypatch):
    from bayes_loco.bayes import samplers

    monkeypatch.setattr(samplers, "jax_accelerator", lambda: True)
    assert not samplers.reads_distinct_rows(bb.NUTS(sampler="nutpie", backend="jax"))
    assert not samplers.reads_distinct_rows(bb.NUTS(sampler="numpyro"))
    assert samplers.reads_distinct_rows(bb.NUTS(sampler="nutpie", backend="numba"))
    assert samplers.reads_distinct_rows(bb.NUTS(sampler="pymc"))
    monkeypatch.setattr(samplers, "jax_accelerator", lambda: False)  # JAX on the CPU: the gathers pay
    assert samplers.reads_distinct_rows(bb.NUTS(sampler="nutpie", backend="jax"))
    assert samplers.reads_distinct_rows(bb.NUTS(sampler="numpyro"))


@pytest.mark.parametrize("accelerator", [True, False])
def test_the_fit_samples_n_rows_where_jax_runs_on_an_accelerator(monkeypatch, bayes_problem, accelerator):
    from bayes_loco.bayes import fit as fit_module
    from bayes_loco.bayes import samplers

    monkeypatch.setattr(samplers, "available_samplers", lambda: ("pymc", "nutpie", "numpyro"))
    monkeypatch.setattr(samplers, "jax_accelerator", lambda: accelerator)
    read = []

    class Sampled(Exception):
        pass

    def sample_nuts(model, *args, **kwargs):
        read.extend(sorted(var.name for var in model.data_vars))
        raise Sampled

    monkeypatch.setattr(fit_module, "sample_nuts", sample_nuts)
    _, data, low_rank = bayes_problem
    with pytest.raises(Sampled):
        bb.fit_posterior(data, 2, nuts={"sampler": "numpyro", "parametrization": "factored"}, start=low_rank,
                         progressbar=False, predictive_draws=0)
    grouped = {bb.dims.DATA_DIFFERENCE_ROWS, bb.dims.DATA_DIFFERENCE_INDEX} <= set(read)
    assert grouped is not accelerator
    assert (bb.dims.DATA_DIFFERENCES in read) is accelerator


def test_fit_resolves_the_backend_from_the_data_size(monkeypatch, bayes_problem):
    from bayes_loco.bayes import fit as fit_module
    from bayes_loco.bayes import samplers

    monkeypatch.setattr(samplers, "available_samplers", lambda: ("pymc", "nutpie"))
    monkeypatch.setattr(samplers, "jax_accelerator", lambda: True)
    monkeypatch.setattr(samplers, "_usable_cores", lambda: 2)
    _, data, low_rank = bayes_problem
    chosen = {}
    for per_core, expected in [(data.n // 2, "jax"), (data.n // 2 + 1, "numba")]:
        bl.set_config(jax_comparisons_per_core=per_core)
        _, nuts, _ = fit_module._resolve(data, 2, "nuts", ties="half", prior=None, nuts=None,
                                         map_settings=None, vi=None, start=low_rank, basis=None, ridge=1.0,
                                         random_seed=0, predictive_draws=0, progressbar=False)
        chosen[expected] = nuts.backend
    assert chosen == {"jax": "jax", "numba": "numba"}


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax not installed")
def test_jax_accelerator_reads_the_default_backend(monkeypatch):
    import jax

    from bayes_loco.bayes import samplers

    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    monkeypatch.delenv("XLA_PYTHON_CLIENT_PREALLOCATE", raising=False)
    assert samplers.jax_accelerator()
    # A study's workers would each take 75 % of the GPU's memory; a user's own setting is kept.
    assert os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "true")
    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
    assert not samplers.jax_accelerator()
    assert os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] == "true"


def test_jax_accelerator_is_false_without_jax(monkeypatch):
    from bayes_loco.bayes import samplers

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None)
    assert not samplers.jax_accelerator()


@pytest.mark.parametrize(("cpus", "chains", "cores", "expected"), [
    (2, 4, None, 2), (8, 4, None, 4), (1, 4, None, 1), (8, 4, 3, 3)])
def test_cores_default_to_one_per_usable_cpu_and_chain(monkeypatch, cpus, chains, cores, expected):
    """PyMC's own default halves the CPU count (hyperthreads), which ran nutpie's chains one at a time
    on a 2-core machine; the fit asks for one per usable CPU, at most one per chain, and records it."""
    from bayes_loco.bayes import samplers

    monkeypatch.setattr(samplers, "_usable_cores", lambda: cpus)
    resolved = samplers.resolve_sampler(bb.NUTS(chains=chains, cores=cores))
    assert resolved.cores == expected
    seen = {}
    monkeypatch.setattr(samplers.pm, "sample", lambda **kwargs: seen.update(kwargs))
    monkeypatch.setattr(samplers, "sample_nutpie", lambda *args, **kwargs: seen.update(kwargs))
    samplers.sample_nuts(None, resolved, lambda rng: {}, 0, False)
    assert seen["cores"] == expected


def test_usable_cores_is_the_process_affinity():
    from bayes_loco.bayes import samplers

    assert samplers._usable_cores() == len(os.sched_getaffinity(0))


def test_settings_are_recorded_typed_and_json_able(nuts):
    settings = nuts.settings
    assert list(settings)[:9] == ["rank", "method", "prior", "ridge", "random_seed", "predictive_draws",
                                  "nuts", "geometry", "plan"]
    assert set(list(settings)[9:]) <= {"advice"}
    assert settings["geometry"] == {"parametrization": "chart", "chart_rank": 1, "fell_back": False,
                                    "reason": "nuts.parametrization='chart'"}
    (only,) = settings["plan"]["attempts"]
    assert settings["plan"]["kept"] == 0 and only["when"] == "first" and only["adaptation"] == "diagonal"
    ran = {key: only[key] for key in ("parametrization", "chart_rank", "target_accept", "draws", "tune")}
    assert ran == {"parametrization": "chart", "chart_rank": 1, "target_accept": 0.9, "draws": 300,
                   "tune": 300}
    assert settings.get("advice", {}) == nuts.advice
    assert settings["predictive_draws"] == 500
    # The partial chart the fixture names: the leading component charted, the second factored.
    assert settings["nuts"] == {"draws": 300, "tune": 300, "chains": 2, "cores": 1, "sampler": "pymc",
                                "target_accept": 0.9, "init_jitter": 0.01, "rhat_max": 1.01, "ess_min": 400.0,
                                "parametrization": "chart", "chart_rank": 1, "blas_threads": 1,
                                "backend": None, "plan": None}
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
    assert bb.Posterior.calibrated_kinds == ("credible", "sandwich", "draws", "quantile", "cvar", "family")
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
    assert (header["chains"], header["draws"]) == (2, 300)
    assert header["divergences"] == int(nuts.tree["sample_stats"]["diverging"].sum())
    assert header["parametrization"] == nuts.settings["nuts"]["parametrization"] == "chart"
    assert header["max R-hat"] == nuts.diagnostics.max_rhat
    stats = nuts.tree["sample_stats"]
    assert header["leapfrog steps per draw"] == pytest.approx(float(stats["n_steps"].mean()), rel=1e-12)
    assert header["leapfrog steps per draw"] >= 1
    assert header["draws at the maximum tree depth"] == int(stats["reached_max_treedepth"].sum())
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
    rng = np.random.default_rng(2)
    point = {name: value + 0.1 * rng.standard_normal(np.shape(value))
             for name, value in nuts.model.initial_point().items()}
    assert back.model.compile_logp()(point) == pytest.approx(nuts.model.compile_logp()(point), rel=1e-12)
    assert {v.name for v in back.model.free_RVs} == {v.name for v in nuts.model.free_RVs}
    assert D.CHART_WEAK_LEFT in {v.name for v in back.model.free_RVs}  # the partial chart that ran


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


# ------------------------------------------------------------------- the tree with ArviZ's defaults


@pytest.fixture(scope="module")
def mixed(problem):
    """Two PyMC chains × (600 + 1000) from the frequentist start: long enough that ArviZ raises no alarm.

    "auto" runs the partial chart here, where PyMC's NUTS needs target_accept 0.95 (1 divergence at 0.9).
    About 38 s: only the slow test that needs a well-mixed posterior uses it.
    """
    _, data, low_rank = problem
    with warnings.catch_warnings():
        warnings.simplefilter("error", bl.SamplerWarning)  # this fit must mix
        return bb.fit_posterior(data, RANK, start=low_rank, progressbar=False, random_seed=0,
                                nuts={"draws": 1000, "tune": 600, "chains": 2, "cores": 1, "sampler": "pymc",
                                      "target_accept": 0.95})


@pytest.mark.slow
def test_arviz_defaults_raise_no_alarm_on_a_well_mixed_posterior(mixed, capsys):
    """A slow test (its fit takes about 38 s). In the default run notebook 02 asserts that ``az.diagnose``
    finds nothing on its NUTS posterior (tests/test_notebooks.py), and
    test_arviz_summary_shows_the_identified_quantities reads the default tree's summary."""
    tree = mixed.tree
    assert mixed.diagnostics.converged
    has_errors, found = az.diagnose(tree, return_diagnostics=True)
    report = capsys.readouterr().out
    assert has_errors is False, report
    assert found["rhat"]["bad_params"] == [] and found["ess"]["bad_params"] == []
    assert found["divergent"]["n_divergent"] == 0 and "no problems detected" in report
    _summary_shows_the_identified_quantities(mixed)


def test_arviz_summary_shows_the_identified_quantities(nuts):
    _summary_shows_the_identified_quantities(nuts)


def _summary_shows_the_identified_quantities(post):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        summary = az.summary(post.tree)
    # Only the identified quantities, every cell a number.
    data = post.data
    assert len(summary) == data.d_x * data.d_phi + post.k
    assert {name.split("[")[0] for name in summary.index} == {D.THETA, D.THETA_RTV}
    assert not summary.isna().any().any()


@pytest.mark.parametrize("plot", ["plot_prior_posterior", "plot_ppc_pava", "plot_ppc_dist"])
def test_arviz_plots_run_on_the_default_tree(nuts, plot):
    import matplotlib.pyplot as plt

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        if plot == "plot_ppc_dist":  # it advises plot_ppc_pava for binary outcomes, and nothing else
            warnings.filterwarnings("ignore", r"Variables y in .* look (binary|discrete)", UserWarning)
        pc = getattr(az, plot)(nuts.tree, backend="matplotlib")
    try:
        assert pc.viz is not None
    finally:
        plt.close("all")


def test_posterior_predictive_is_bernoulli_of_the_preference_probabilities(nuts):
    tree, data = nuts.tree, nuts.data
    y_rep = tree["posterior_predictive"][D.OBSERVED]
    p = tree["preference_probability"][D.PROBABILITY]
    assert y_rep.dims == p.dims == ("chain", "draw", D.COMPARISON)
    assert y_rep.sizes["chain"] == 2 and y_rep.sizes["draw"] == 250  # 500 draws over two chains
    np.testing.assert_array_equal(tree["observed_data"][D.OBSERVED].values, data.labels)
    np.testing.assert_array_equal(y_rep[D.COMPARISON].values, tree["observed_data"][D.COMPARISON].values)
    # p_t = σ(x_tᵀ Θ Δφ_t) for the thinned posterior draws, computed here draw by draw.
    theta = tree["posterior"][D.THETA].sel(draw=p["draw"]).values
    for c, d in ((0, 0), (1, 17), (1, 249)):
        eta = np.array([x @ theta[c, d] @ f for x, f in zip(data.contexts, data.differences, strict=True)])
        np.testing.assert_allclose(p.values[c, d], 1 / (1 + np.exp(-eta)), rtol=1e-10)
    assert set(np.unique(y_rep.values)) == {0, 1}
    # Replicated labels: Bernoulli(p). Their mean over 500 × 800 draws is p's within a few sd.
    gap = y_rep.values.mean() - p.values.mean()
    assert abs(gap) < 4 * 0.5 / np.sqrt(y_rep.size)
    # The posterior predictive reproduces the observed preference rate.
    assert abs(y_rep.values.mean() - data.labels.mean()) < 0.05


def test_predictive_draws_are_capped():
    assert predictive_indices(4, 1000, 3000, 500).size == 125  # per chain
    assert predictive_indices(4, 1000, 100_000, 500).size * 4 * 100_000 <= setting("max_predictive_values")
    assert predictive_indices(4, 1000, 10**7, 500).size == 1  # at least one draw per chain
    assert predictive_indices(2, 10, 100, 500).tolist() == list(range(10))
    idx = predictive_indices(2, 300, 800, 500)
    assert idx[0] == 0 and idx[-1] == 299 and (np.diff(idx) > 0).all()


def test_prior_group_holds_draws_of_the_factor_prior(nuts):
    prior = nuts.tree["prior"]
    assert set(prior.data_vars) == {D.THETA, D.THETA_RTV}
    assert prior.sizes["chain"] == 1 and prior.sizes["draw"] == 500
    np.testing.assert_array_equal(prior[D.RTV_COORD].values, nuts.tree["posterior"][D.RTV_COORD].values)
    theta = prior[D.THETA].values[0]
    np.testing.assert_allclose(prior[D.THETA_RTV].values[0], nuts.basis.to_coordinates(theta), atol=1e-12)
    # Entries of U Vᵀ with N(0, 1) factors: mean 0, variance r.
    assert abs(theta.mean()) < 0.1 and theta.var() == pytest.approx(RANK, rel=0.15)


def test_map_and_vi_trees_write_to_netcdf(map_fit, tmp_path):
    path = tmp_path / "map.nc"
    map_fit.tree.to_netcdf(path, engine="h5netcdf")
    with xr.open_datatree(path, engine="h5netcdf") as back:
        np.testing.assert_array_equal(back["point_estimate"][D.THETA_RTV].values, map_fit.estimate)
        np.testing.assert_array_equal(back["constant_data"]["rtv_identified"].values, map_fit.identified)
        assert back.attrs["chains"] == 1
        assert back.attrs["representation"] == map_fit.tree.attrs["representation"]


def test_posterior_renders_its_summary_as_html(nuts, map_fit):
    for post in (nuts, map_fit):
        html = post._repr_html_()
        assert html == post.summary()._repr_html_() and post.summary().title in html
