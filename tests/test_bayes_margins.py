"""The margins read from distinct rows (bayes_loco.bayes.margins): same likelihood, cheaper graph."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pymc as pm
import pytest
from scipy.special import log_expit

import bayes_loco as bl
from bayes_loco import bayes as bb
from bayes_loco.bayes import dims as D
from bayes_loco.bayes.margins import RowLayout, add_margins, as_rows, row_coords, row_layout


def _repeated(n: int, n_users: int, n_items: int, seed: int, *, ties: bool = False) -> bl.PreferenceData:
    """Users (contexts) and item pairs (differences) that repeat, labels from a random rank-2 Θ."""
    rng = np.random.default_rng(seed)
    users = rng.standard_normal((n_users, 4))
    items = rng.standard_normal((n_items, 5))
    who = rng.integers(n_users, size=n)
    pairs = np.array([rng.choice(n_items, 2, replace=False) for _ in range(n)])
    x, dphi = users[who], items[pairs[:, 0]] - items[pairs[:, 1]]
    theta = rng.standard_normal((4, 2)) @ rng.standard_normal((2, 5)) / 2
    eta = np.sum((x @ theta) * dphi, axis=1)
    y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float)
    if ties:
        y[rng.random(n) < 0.2] = 0.5
    return bl.PreferenceData(x, dphi, y)


def _distinct(values):
    rows, index = np.unique(values, axis=0, return_inverse=True)
    return rows, index.reshape(-1)


def _all_layouts(data):
    sides = {"contexts": _distinct(data.contexts), "differences": _distinct(data.differences)}
    for ctx, diff in itertools.product([False, True], repeat=2):
        yield RowLayout(sides["contexts"] if ctx else None, sides["differences"] if diff else None)


def _margins_and_gradient(data, layout, u, v):
    with pm.Model(coords=bb.model.model_coords(data, 2) | row_coords(layout)) as model:
        uu = pm.Flat(D.LEFT, dims=(D.CONTEXT, D.RANK))
        vv = pm.Flat(D.RIGHT, dims=(D.FEATURE, D.RANK))
        y = np.asarray(data.labels, dtype=float)
        eta = add_margins(data, uu, vv, layout)
        pm.Deterministic("eta", eta)
        pm.Potential("loglik", (y * eta - pm.math.log1pexp(eta)).sum())
    point = {D.LEFT: u, D.RIGHT: v}
    eta_value = model.compile_fn(model.replace_rvs_by_values([model["eta"]])[0])(point)
    return eta_value, model.compile_logp()(point), model.compile_dlogp()(point)


def test_every_layout_gives_the_margins_and_gradient_of_the_rows():
    data = _repeated(400, 7, 6, seed=3)
    rng = np.random.default_rng(4)
    u, v = rng.standard_normal((4, 2)), rng.standard_normal((5, 2))
    eta_true = np.sum((data.contexts @ u) * (data.differences @ v), axis=1)
    y = np.asarray(data.labels, dtype=float)
    logp_true = float(np.sum(y * log_expit(eta_true) + (1 - y) * log_expit(-eta_true)))
    reference = None
    for layout in _all_layouts(data):
        eta, logp, grad = _margins_and_gradient(data, layout, u, v)
        np.testing.assert_allclose(eta, eta_true, rtol=1e-12, atol=1e-12)
        assert logp == pytest.approx(logp_true, rel=1e-12)
        if reference is None:
            reference = grad
        np.testing.assert_allclose(grad, reference, rtol=1e-10, atol=1e-10)


def test_row_layout_groups_the_side_that_repeats():
    paper = bl.simulate.paper_problem(d_x=8, d_a=6, d_s=5, rank=2, imbalance=3, seed=11).sample(1000, seed=12)
    layout = row_layout(paper, 2)
    assert layout.contexts is None
    assert layout.differences is not None
    rows, index = layout.differences
    assert rows.shape[0] < 30 < paper.n
    np.testing.assert_array_equal(rows[index], paper.differences)
    both = row_layout(_repeated(2000, 10, 8, seed=5), 2)
    assert both.contexts is not None and both.differences is not None
    rng = np.random.default_rng(6)
    dense = bl.PreferenceData(rng.standard_normal((300, 4)), rng.standard_normal((300, 5)),
                              rng.integers(0, 2, 300))
    assert row_layout(dense, 2).sizes == {"contexts": None, "differences": None}
    assert row_layout(paper, 2, group_rows=False).sizes == {"contexts": None, "differences": None}
    with pytest.raises(TypeError, match="group_rows must be a bool"):
        row_layout(paper, 2, group_rows=1)


@pytest.mark.parametrize("ties", [False, True])
def test_grouped_models_have_the_plain_models_log_density(ties):
    data = _repeated(600, 9, 7, seed=7, ties=ties)
    plain = bb.build_model(data, 2)
    grouped = bb.build_model(data, 2, group_rows=True)
    assert {D.DATA_CONTEXT_ROWS, D.DATA_DIFFERENCE_ROWS} <= {var.name for var in grouped.data_vars}
    assert D.DATA_DIFFERENCES in {var.name for var in plain.data_vars}
    rng = np.random.default_rng(8)
    point = {name: rng.standard_normal(np.shape(value)) for name, value in plain.initial_point().items()}
    assert grouped.compile_logp()(point) == pytest.approx(plain.compile_logp()(point), rel=1e-12)
    np.testing.assert_allclose(grouped.compile_dlogp()(point), plain.compile_dlogp()(point), rtol=1e-9,
                               atol=1e-9)
    frame = bb.chart_frame(data, bl.fit_low_rank(data, 2, ridge=1.0).theta, 2)
    chart_plain = bb.build_chart_model(data, 2, frame)
    chart_grouped = bb.build_chart_model(data, 2, frame, group_rows=True)
    point = chart_plain.initial_point()
    assert chart_grouped.compile_logp()(point) == pytest.approx(chart_plain.compile_logp()(point), rel=1e-12)


def test_as_rows_restores_the_data_in_the_tree():
    data = _repeated(500, 6, 6, seed=9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        post = bb.fit_posterior(data, 2, nuts={"draws": 30, "tune": 30, "chains": 1, "sampler": "pymc"},
                                progressbar=False, random_seed=1, predictive_draws=0)
    constant = post.tree["constant_data"].to_dataset()
    np.testing.assert_array_equal(constant[D.DATA_CONTEXTS].values, data.contexts)
    np.testing.assert_array_equal(constant[D.DATA_DIFFERENCES].values, data.differences)
    assert not {D.DATA_CONTEXT_ROWS, D.DATA_DIFFERENCE_INDEX, D.CONTEXT_ROW} & set(constant.variables)
    untouched = constant.drop_vars([D.DATA_CONTEXTS, D.DATA_DIFFERENCES])
    assert as_rows(untouched, data) is untouched
