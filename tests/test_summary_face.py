"""What a reader sees of a fit's summary: fixed precision, honest iterations, contrasts, level.

Oracles: statsmodels' Logit on the contrast design of a plain Bradley–Terry
problem (each action against the first), ArviZ's own ``az.summary`` at its
default interval level, and the fit's own Θ̂ for the differences of a posterior.
"""

from __future__ import annotations

import re
import warnings

import arviz as az
import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy import stats

import bayes_loco as bl
from bayes_loco import simulate
from bayes_loco.results import Summary, table_decimals

ACTIONS = 8


@pytest.fixture(scope="module")
def bradley_terry():
    """Plain Bradley–Terry: x = 1, actions one-hot, Δφ_t = e_i − e_j (only differences identified)."""
    rng = np.random.default_rng(36)
    n = 1500
    i = rng.integers(0, ACTIONS, n)
    j = (i + rng.integers(1, ACTIONS, n)) % ACTIONS
    skill = rng.normal(0.0, 1.0, ACTIONS)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(skill[i] - skill[j])))).astype(int)
    eye = np.eye(ACTIONS)
    return bl.PreferenceData(np.ones((n, 1)), eye[i] - eye[j], y)


@pytest.fixture(scope="module")
def small():
    """The paper's simulation, small: its low-rank fit has coordinates that are zero up to round-off."""
    data = simulate.paper_problem(d_s=4, d_a=4, d_x=4, rank=1, seed=0).sample(300, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", bl.BayesLocoWarning)
        return data, bl.fit_prs(data, 1)


def printed_rows(summary: Summary) -> list[list[str]]:
    """The cells of the printed table's rows (the lines between the header's rule and the notes' rule)."""
    lines = str(summary).splitlines()
    rules = [k for k, line in enumerate(lines) if set(line) == {"="}]
    body = lines[rules[1] + 1:rules[2]]
    return [re.split(r"\s{2,}|(?<=\S)\s(?=[-\d])", line.strip()) for line in body[2:]]


def test_round_off_zeros_print_as_zero_at_one_fixed_precision(small):
    _, prs = small
    for fit in (prs.low_rank, prs):
        summary = fit.summary()
        table = summary.to_frame()
        # the unrounded table keeps the round-off, the printed one shows 0 at its precision
        assert (np.abs(table["estimate"]) < 1e-12).sum() >= 3 and (table["estimate"] != 0).all()
        text = str(summary)
        assert "e-" not in text.split("=" * 10)[-1].split("[1]")[0]
        decimals = table_decimals(table)
        assert decimals == 3  # 4 significant digits of 3.98 (an upper bound), 2 of the smallest se 0.376
        cells = [cell for row in printed_rows(summary) for cell in row[-4:]]
        assert len(cells) == 4 * len(table)
        assert all(re.fullmatch(rf"-?\d+\.\d{{{decimals}}}", cell) for cell in cells), cells
        assert "-0.000" not in text and text.count(" 0.000 ") >= 3


def test_table_decimals_follow_the_largest_value_and_the_smallest_standard_error():
    frame = pd.DataFrame({"estimate": [1234.5, -3e-16], "std_err": [0.5, 0.00123],
                          "lower": [1233.5, -0.002], "upper": [1235.5, 0.002]},
                         index=pd.Index(["a", "b"], name="coordinate"))
    assert table_decimals(frame) == 4  # two significant digits of 0.00123
    frame["std_err"] = [50.0, 70.0]
    assert table_decimals(frame) == 0  # four significant digits of 1235.5
    rows = printed_rows(Summary("t", {"N": 1}, frame))
    assert rows[0][1:] == ["1234", "50", "1234", "1236"] and rows[1][1:] == ["0", "70", "0", "0"]


def test_iterations_say_what_is_true(small):
    _, prs = small
    header, notes = prs.summary().header, prs.summary().notes
    assert "iterations" not in header
    # without a split the reduced MLE starts at its optimum: no step, and the summary says why
    assert prs.diagnostics.n_iter == 0 and header["Newton steps"] == "0 (start optimal)"
    assert header["FGD iterations"] == prs.low_rank.diagnostics.n_iter >= 1
    assert any("took no Newton step" in note for note in notes)
    assert prs.low_rank.summary().header["iterations"] == prs.low_rank.diagnostics.n_iter >= 1


def reference_contrasts(data: bl.PreferenceData, level: float):
    """statsmodels' Logit on the contrast design: column j − 1 is action j against action 0."""
    ref = sm.Logit(data.labels.astype(float), data.differences[:, 1:]).fit(method="newton", tol=1e-12,
                                                                          disp=0)
    return ref.params, ref.bse, ref.conf_int(alpha=1 - level)


@pytest.mark.parametrize("level", [0.95, 0.8])
def test_bradley_terry_summary_lists_the_identified_differences(bradley_terry, level):
    summary = bl.fit_mle(bradley_terry).summary(level)
    table = summary.to_frame()
    assert list(table.index) == [f"[0,{j}] − [0,0]" for j in range(1, ACTIONS)]
    params, bse, interval = reference_contrasts(bradley_terry, level)
    np.testing.assert_allclose(table["estimate"], params, atol=1e-6)
    np.testing.assert_allclose(table["std_err"], bse, atol=1e-6)
    np.testing.assert_allclose(table[["lower", "upper"]], interval, atol=1e-6)
    assert summary.header["k_eff"] == ACTIONS - 1
    text = " ".join(summary.notes)
    assert "no comparison reaches them" not in text
    assert f"{ACTIONS} are reached by comparisons" in text and "Only differences between features" in text
    assert "[0,1] − [0,0]" in str(summary)


def test_low_rank_and_map_summaries_list_the_same_differences(bradley_terry):
    params, bse, _ = reference_contrasts(bradley_terry, 0.95)
    low_rank = bl.fit_low_rank(bradley_terry, 1).summary().to_frame()
    rows = [f"[0,{j}] − [0,0]" for j in range(1, ACTIONS)]
    np.testing.assert_allclose(low_rank.loc[rows, "estimate"], params, atol=1e-5)
    np.testing.assert_allclose(low_rank.loc[rows, "std_err"], bse, rtol=1e-4)

    from bayes_loco import bayes

    post = bayes.fit_posterior(bradley_terry, 1, method="map", map={"draws": 400}, progressbar=False)
    summary = post.summary()
    table = summary.to_frame()
    theta = post.basis.to_theta(post.estimate)[0]
    np.testing.assert_allclose(table.loc[rows, "estimate"], theta[1:] - theta[0], atol=1e-10)
    draws = post.rtv_draws @ np.stack([post.basis.transform(np.ones((1, 1)), (np.eye(ACTIONS)[j] - np.eye(
        ACTIONS)[0])[None])[0] for j in range(1, ACTIONS)]).T
    np.testing.assert_allclose(table.loc[rows, "std_err"], draws.std(axis=0, ddof=1), rtol=1e-6)
    assert (table.loc[rows, "lower"] < table.loc[rows, "estimate"]).all()
    assert any("Only differences between features" in note for note in summary.notes)


def test_every_summary_prints_its_interval_level(small):
    data, prs = small
    for fit in (bl.fit_mle(data), prs.low_rank, prs):
        assert fit.summary().header["interval"] == "90% Wald"
        summary = fit.summary(0.8)
        assert summary.header["interval"] == "80% Wald" and "80% Wald" in str(summary)
        half = summary.to_frame()["upper"] - summary.to_frame()["estimate"]
        np.testing.assert_allclose(half, stats.norm.ppf(0.9) * summary.to_frame()["std_err"], rtol=1e-10)


def test_posterior_summary_at_arviz_default_level_is_arviz_summary(small):
    from bayes_loco import bayes

    data, prs = small
    post = bayes.fit_posterior(data, 1, method="map", map={"draws": 400}, start=prs.low_rank,
                               progressbar=False)
    default = az.rcParams["stats.ci_prob"]
    ours = post.summary().header["interval"]
    assert ours == "90% equal-tailed" and default != 0.9  # the two defaults differ: the header says ours
    summary = post.summary(level=default)
    assert summary.header["interval"] == f"{100 * default:.4g}% equal-tailed"
    theirs = az.summary(post.tree, var_names=["theta_rtv"], coords=post.identified_coords())
    lower = [c for c in theirs.columns if c.endswith("_lb")]
    upper = [c for c in theirs.columns if c.endswith("_ub")]
    assert len(lower) == len(upper) == 1
    table = summary.to_frame()
    # az.summary rounds to 2 significant digits beyond the sd by default
    np.testing.assert_allclose(table["lower"], theirs[lower[0]].to_numpy(float), atol=0.01)
    np.testing.assert_allclose(table["upper"], theirs[upper[0]].to_numpy(float), atol=0.01)
    assert "iterations" in summary.header and summary.header["iterations"] >= 1


def test_compare_policies_shows_its_key_columns_and_keeps_every_column(small):
    from bayes_loco.experiments import COLUMNS, compare_policies
    from bayes_loco.experiments.columns import SHOWN_COLUMNS, PolicyTable

    problem = simulate.paper_problem(d_s=4, d_a=4, d_x=4, rank=1, seed=0)
    data, prs = small
    methods = ["PRS", "PRS-exact-Wald", "LowRank-Greedy"]
    table = compare_policies(data, problem.population(30, seed=2), rank=1, truth=problem, methods=methods,
                             fits={"prs": prs})
    assert isinstance(table, PolicyTable) and isinstance(table, pd.DataFrame)
    assert sorted(table.columns) == sorted(COLUMNS) and list(table.columns[:5]) == list(SHOWN_COLUMNS)
    with pd.option_context("display.width", 80, "display.max_columns", 20):
        text = repr(table)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[0].split() == list(SHOWN_COLUMNS) and "..." not in text
    for method, value in zip(table["method"], table["suboptimality"], strict=True):
        assert f"{value:.6f}" in text and method in text
    assert "17 more columns" in text and "chart_rank" in text
    html = table._repr_html_()
    assert "suboptimality" in html and "<td>radius" not in html and "17 more columns" in html
    # nothing is lost: every column, printed in full by to_string, and derived frames are plain
    assert "chart_rank" in table.to_string().splitlines()[0]
    assert type(table.set_index("method")) is pd.DataFrame
    assert np.isfinite(table.set_index("method").loc["PRS-exact-Wald", "radius"])


def test_a_sampler_summary_gives_its_draws_not_iterations(bayes_nuts):
    header = bayes_nuts.summary().header
    # a sampler's n_iter is its draws per chain, which the header gives as such
    assert "iterations" not in header and header["draws"] == bayes_nuts.diagnostics.n_iter
    assert header["interval"] == "90% equal-tailed"
    rows = printed_rows(bayes_nuts.summary())
    assert all(re.fullmatch(r"\d+", cell) for row in rows for cell in row[-3:-1])  # ESS as whole numbers
