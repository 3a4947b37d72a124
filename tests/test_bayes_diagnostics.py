"""Davidson's ν in the NUTS diagnostics and the summary (bayes/diagnostics.py, bayes/posterior.py).

The fit of conftest's ``bayes_nuts`` is given a ν of known behaviour in its tree: chains
that disagree, or draws that barely move, must be reported at ``nu``; a well-mixed ν
appears as the summary's last row with the draws' own mean, sd and quantiles.
"""

from __future__ import annotations

import dataclasses

import arviz as az
import numpy as np
import pytest
import xarray as xr

from bayes_loco import bayes as bb
from bayes_loco.bayes import dims as D
from bayes_loco.bayes.diagnostics import diagnosed_variables, diagnostic_table, nuts_diagnostics


@pytest.fixture
def nuts(bayes_nuts):
    return bayes_nuts


def _with_nu(post, values: np.ndarray):
    """``post`` as a Davidson fit whose posterior holds ``values`` (chain × draw) as ν."""
    tree = post.tree.copy(deep=True)
    posterior = tree[D.POSTERIOR].to_dataset(inherit=False)
    coords = {dim: posterior[dim].values for dim in ("chain", "draw")}
    posterior[D.NU] = xr.DataArray(values, dims=("chain", "draw"), coords=coords)
    tree[D.POSTERIOR] = xr.DataTree(posterior)
    return dataclasses.replace(post, tree=tree, settings={**post.settings, "ties": "davidson"})


def _strict(post, **changes):
    return dataclasses.replace(bb.NUTS(**post.settings["nuts"]), **changes)


def test_nu_is_diagnosed_where_the_model_has_it(nuts):
    chains, draws = nuts.tree[D.POSTERIOR].sizes["chain"], nuts.tree[D.POSTERIOR].sizes["draw"]
    assert diagnosed_variables(nuts.tree) == (D.THETA_RTV, D.THETA)
    plain, _ = nuts_diagnostics(nuts.tree, _strict(nuts), 1.0)
    assert plain.max_rhat < 1.5
    # Two chains of ν around 1 and 3 (sd 0.05 on the log scale): rank-normalised R-hat near its
    # largest for two chains (about 1.8), far above any of Θ's.
    rng = np.random.default_rng(0)
    apart = np.exp(np.log([[1.0], [3.0]]) + 0.05 * rng.standard_normal((chains, draws)))
    post = _with_nu(nuts, apart)
    assert diagnosed_variables(post.tree) == (D.THETA_RTV, D.THETA, D.NU)
    d, advice = nuts_diagnostics(post.tree, _strict(nuts, rhat_max=1.01, ess_min=0.0), 1.0)
    expected = float(az.rhat(post.tree, var_names=[D.NU])[D.NU])
    assert expected > 1.5 and d.max_rhat == pytest.approx(expected, rel=1e-12)
    rhat_message = next(m for m in d.warnings if "max R-hat" in m)
    assert f"at {D.NU} " in rhat_message and "(over Θ, θ_rtv and ν)" in rhat_message
    assert advice["tune"] == 2 * max(nuts.settings["nuts"]["tune"], draws)


def test_a_stuck_nu_has_the_smallest_ess(nuts):
    chains, draws = nuts.tree[D.POSTERIOR].sizes["chain"], nuts.tree[D.POSTERIOR].sizes["draw"]
    # A random walk with tiny steps from the same point in both chains: almost no independent draws.
    rng = np.random.default_rng(1)
    walk = np.exp(np.cumsum(0.01 * rng.standard_normal((chains, draws)), axis=1))
    post = _with_nu(nuts, walk)
    d, _ = nuts_diagnostics(post.tree, _strict(nuts, rhat_max=100.0, ess_min=1e9), 1.0)
    bulk = float(az.ess(post.tree, var_names=[D.NU], method="bulk")[D.NU])
    assert bulk < 50 and d.min_ess_bulk == pytest.approx(bulk, rel=1e-12)
    assert f"bulk {bulk:.0f} at {D.NU}" in next(m for m in d.warnings if "min ESS" in m)


def test_summary_shows_nu_as_its_last_row(nuts):
    assert D.NU not in nuts.summary().table.index
    chains, draws = nuts.tree[D.POSTERIOR].sizes["chain"], nuts.tree[D.POSTERIOR].sizes["draw"]
    values = np.exp(0.2 * np.random.default_rng(2).standard_normal((chains, draws)))
    post = _with_nu(nuts, values)
    summary = post.summary(level=0.9)
    table = summary.table
    assert table.index[-1] == D.NU and len(table) == len(nuts.summary().table) + 1
    row = table.loc[D.NU]
    flat = values.ravel()
    assert row["estimate"] == pytest.approx(flat.mean(), rel=1e-12) and post.nu == row["estimate"]
    assert row["std_err"] == pytest.approx(flat.std(ddof=1), rel=1e-9)
    np.testing.assert_allclose([row["lower"], row["upper"]], np.quantile(flat, [0.05, 0.95]), rtol=1e-9)
    # Independent draws: R-hat near 1 and bulk ESS near the number of draws (its sd for 600 draws ~ 10 %).
    assert abs(row["r_hat"] - 1) < 0.02 and 0.6 * flat.size < row["ess_bulk"] < 1.6 * flat.size
    # The θ_rtv rows are those of the fit without ν.
    np.testing.assert_array_equal(table.drop(index=D.NU).to_numpy(), nuts.summary(level=0.9).table.to_numpy())


def test_the_diagnostic_table_is_arviz_s_and_a_given_one_is_read(nuts):
    table = diagnostic_table(nuts.tree)
    rhat = az.rhat(nuts.tree, var_names=[D.THETA])[D.THETA].values
    theta_rows = table.index.str.startswith(f"{D.THETA}[")
    assert theta_rows.sum() == rhat.size and table.loc[theta_rows, "r_hat"].max() == pytest.approx(rhat.max())
    assert table.index.str.startswith(f"{D.THETA_RTV}[").sum() == nuts.tree[D.POSTERIOR].sizes[D.RTV_COORD]
    # A table handed in (a re-diagnosis after the fall-back) is used as given, not recomputed.
    doctored = table.copy()
    doctored.iloc[0, doctored.columns.get_loc("r_hat")] = 1.5
    d, _ = nuts_diagnostics(nuts.tree, _strict(nuts, rhat_max=1.01, ess_min=0.0), 1.0, table=doctored)
    # Read the R-hat message by what it says: the run may also have diverged, and its message comes first.
    rhat_messages = [m for m in d.warnings if m.startswith("max R-hat")]
    assert d.max_rhat == 1.5 and not d.converged
    assert len(rhat_messages) == 1 and f"at {doctored.index[0]}" in rhat_messages[0]
