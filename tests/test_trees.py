"""The shared DataTree layout: frequentist fits as Wald draws, beside a posterior in one ArviZ plot."""

from __future__ import annotations

import subprocess
import sys
import warnings

import arviz as az
import numpy as np
import pytest
import xarray as xr
from scipy import stats

import bayes_loco as bl
from bayes_loco import trees


@pytest.fixture(scope="module")
def fits(bayes_problem):
    _, data, low_rank = bayes_problem
    return {"mle": bl.fit_mle(data), "low_rank": low_rank, "prs": bl.fit_prs(data, low_rank.rank)}


def _wald_by_hand(fit):
    """θ̂, identified coordinates and Wald standard errors, from a Fisher information built row by row."""
    data = getattr(fit, "estimation_data", None) or fit.data
    coordinates = fit.coordinates
    info = np.zeros((coordinates.dim, coordinates.dim))
    for x, d in zip(data.contexts, data.differences, strict=True):
        z = coordinates.to_coordinates(np.outer(x, d))
        p = 1 / (1 + np.exp(-(x @ fit.theta @ d)))
        info += p * (1 - p) * np.outer(z, z)
    vals, vecs = np.linalg.eigh(info)
    keep = vals > 1e-10 * vals.max()
    q = vecs[:, keep]
    identified = np.linalg.norm(np.eye(coordinates.dim) - q @ q.T, axis=0) <= 1e-6
    cov = (q / vals[keep]) @ q.T
    return fit.estimate, identified, np.sqrt(np.diag(cov))


@pytest.mark.parametrize("name", ["low_rank", "prs"])
def test_rtv_fit_exports_wald_draws_of_theta_rtv(fits, name):
    fit = fits[name]
    tree = fit.to_datatree(chains=2, draws=2000, seed=3)
    assert list(tree.children) == ["posterior", "point_estimate", "constant_data"]
    post = tree["posterior"]
    assert list(post.data_vars) == ["theta_rtv"]
    rtv = post["theta_rtv"]
    assert rtv.dims == ("chain", "draw", "rtv_coord") and rtv.shape == (2, 2000, fit.coordinates.dim)
    assert list(rtv["rtv_coord"].values) == fit.coordinates.labels()
    estimate, identified, se = _wald_by_hand(fit)
    np.testing.assert_array_equal(tree["constant_data"]["rtv_identified"].values, identified)
    assert 0 < identified.sum() < identified.size
    # Unidentified coordinates have infinite Wald variance: NaN draws, inf standard error.
    assert np.isnan(rtv.values[..., ~identified]).all() and np.isfinite(rtv.values[..., identified]).all()
    point = tree["point_estimate"]
    np.testing.assert_allclose(point["theta_rtv"].values, estimate)
    np.testing.assert_allclose(point["std_err"].values[identified], se[identified], rtol=1e-6)
    assert np.isinf(point["std_err"].values[~identified]).all()
    np.testing.assert_allclose(point["theta"].values, fit.theta)
    # The draws are N(θ̂, I⁺): mean and sd within Monte Carlo error of θ̂ and the Wald standard errors.
    draws = rtv.values.reshape(-1, identified.size)[:, identified]
    n = draws.shape[0]
    assert (np.abs(draws.mean(0) - estimate[identified]) < 4.5 * se[identified] / np.sqrt(n)).all()
    np.testing.assert_allclose(draws.std(0, ddof=1), se[identified], rtol=0.08)
    # The same standard errors as the fit's own summary.
    table = fit.summary().table
    np.testing.assert_allclose(point["std_err"].values[identified], table["std_err"].to_numpy(), rtol=1e-8)
    attrs = tree.attrs
    assert (attrs["chains"], attrs["draws"], attrs["random_seed"]) == (2, 2000, 3)
    assert attrs["rank"] == fit.rank and type(attrs["rank"]) is int and attrs["k_eff"] == identified.sum()
    assert attrs["method"] == fit.diagnostics.method and attrs["representation"] == "Wald normal draws"


def test_mle_exports_theta_with_unidentified_entries_nan(fits):
    fit = fits["mle"]
    tree = fit.to_datatree(chains=1, draws=500)
    theta = tree["posterior"]["theta"]
    assert theta.dims == ("chain", "draw", "context", "feature")
    assert theta.shape[1:] == (500, *fit.theta.shape)
    _, identified, se = _wald_by_hand(fit)
    mask = tree["constant_data"]["theta_identified"].values
    np.testing.assert_array_equal(mask.ravel(), identified)
    assert np.isnan(theta.values[..., ~mask]).all() and np.isfinite(theta.values[..., mask]).all()
    np.testing.assert_allclose(tree["point_estimate"]["std_err"].values[mask], se[identified], rtol=1e-6)
    assert "rank" not in tree.attrs


def test_exports_are_seeded_and_validated(fits, bayes_nuts):
    fit = fits["low_rank"]
    a, b = fit.to_datatree(seed=1), trees.fit_tree(fit, seed=1)
    assert a.identical(b) and a["posterior"].sizes["chain"] == 4 and a["posterior"].sizes["draw"] == 1000
    assert not a.identical(fit.to_datatree(seed=2))
    with pytest.raises(ValueError, match="chains"):
        fit.to_datatree(chains=0)
    with pytest.raises(TypeError, match="draws"):
        fit.to_datatree(draws=1.5)
    with pytest.raises(TypeError, match=r"post\.tree"):
        trees.fit_tree(bayes_nuts)


def test_frequentist_tree_writes_to_netcdf(fits, tmp_path):
    tree = fits["prs"].to_datatree(chains=1, draws=50)
    tree.to_netcdf(tmp_path / "prs.nc", engine="h5netcdf")
    with xr.open_datatree(tmp_path / "prs.nc", engine="h5netcdf") as back:
        assert back.identical(tree)


def test_az_summary_of_an_export_gives_the_wald_intervals(fits):
    fit = fits["low_rank"]
    tree = fit.to_datatree(chains=4, draws=2500, seed=0)
    identified = tree["constant_data"]["rtv_identified"].values
    labels = tree["posterior"]["rtv_coord"].values[identified]
    summary = az.summary(tree, coords={"rtv_coord": labels}, ci_prob=0.95, round_to="none")
    table = fit.summary(0.95).table
    np.testing.assert_allclose(summary["sd"].to_numpy(float), table["std_err"].to_numpy(), rtol=0.05)
    half = stats.norm.ppf(0.975) * table["std_err"].to_numpy()
    lower = summary[next(c for c in summary.columns if c.endswith("_lb"))].to_numpy(float)
    np.testing.assert_allclose(lower, table["lower"].to_numpy(), atol=0.1 * half.max())
    assert (summary["ess_bulk"].to_numpy(float) > 5000).all()  # independent draws
    assert (summary["r_hat"].to_numpy(float) < 1.01).all()


def test_one_forest_plot_shows_both_roads(bayes_nuts, bayes_problem):
    import matplotlib.pyplot as plt

    _, _, low_rank = bayes_problem
    post = bayes_nuts
    assert post.start is low_rank  # the posterior lives in the low-rank fit's RTV coordinates
    shape = post.tree["posterior"].sizes
    wald = low_rank.to_datatree(chains=shape["chain"], draws=shape["draw"])
    labels = post.tree["posterior"]["rtv_coord"].values
    np.testing.assert_array_equal(wald["posterior"]["rtv_coord"].values, labels)
    np.testing.assert_array_equal(wald["constant_data"]["rtv_identified"].values, post.identified)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # aligned trees: no outer join, no FutureWarning, no NaN chains
        pc = az.plot_forest({"NUTS": post.tree, "Wald (FGD)": wald}, var_names=["theta_rtv"], combined=True,
                            backend="matplotlib")
    try:
        assert pc.viz is not None
    finally:
        plt.close("all")


def test_fits_render_their_summary_as_html(fits):
    for fit in fits.values():
        html = fit._repr_html_()
        assert html == fit.summary()._repr_html_() and fit.summary().title in html


def test_exporting_a_frequentist_fit_does_not_import_pymc():
    code = """
import sys
import bayes_loco as bl
from bayes_loco import simulate
data = simulate.paper_problem(d_s=3, d_a=4, d_x=4, rank=2, seed=0).sample(300, seed=1)
tree = bl.fit_low_rank(data, 2).to_datatree(draws=10)
assert "theta_rtv" in tree["posterior"].data_vars
assert "pymc" not in sys.modules, "exporting imported PyMC"
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


def test_identified_coords_keep_the_identified_rtv_coordinates_for_arviz():
    from bayes_loco.simulate import paper_problem
    from bayes_loco.trees import identified_coords

    problem = paper_problem(d_s=3, d_a=4, d_x=3, rank=2, seed=0)
    fit = bl.fit_prs(problem.sample(600, seed=1), 2)
    tree = fit.to_datatree(chains=2, draws=50, seed=0)
    coords = identified_coords(tree)
    mask = tree.constant_data["rtv_identified"].values
    assert 0 < mask.sum() < mask.size  # the state block cancels: some coordinates are not identified
    assert coords["rtv_coord"] == list(tree.constant_data["rtv_coord"].values[mask])
    table = az.summary(tree, var_names=["theta_rtv"], coords=coords)
    assert len(table) == fit.coordinates.dim - (mask.size - mask.sum()) == int(mask.sum())
    with pytest.raises(ValueError, match=r"no constant_data\.rtv_identified"):
        identified_coords(bl.fit_mle(problem.sample(300, seed=2)).to_datatree(chains=1, draws=5))
    with pytest.raises(TypeError, match="tree must be an xarray DataTree"):
        identified_coords({"posterior": None})


def test_a_posterior_gives_its_identified_coords():
    from bayes_loco import bayes
    from bayes_loco.simulate import paper_problem

    data = paper_problem(d_s=3, d_a=4, d_x=3, rank=2, seed=0).sample(400, seed=1)
    post = bayes.fit_posterior(data, 2, method="map", map={"draws": 40}, predictive_draws=0, random_seed=0,
                               progressbar=False)
    coords = post.identified_coords()
    assert coords["rtv_coord"] == list(np.asarray(post.basis.labels())[post.identified])
    assert len(az.summary(post.tree, var_names=["theta_rtv"], coords=coords)) == int(post.identified.sum())
