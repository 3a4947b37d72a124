"""Comparisons as item indices, counts as frequency weights, cov_type, names and bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import repeated_rows
from scipy import sparse
from scipy.special import expit

import bayes_loco as bl
from bayes_loco.model import margins, score_matrix

ITEMS = 6


def _battles(n: int, seed: int, *, ties: float = 0.0, contexts: int = 0, style: int = 0):
    """Item battles with BT strengths (and context effects, style columns); item indices and labels."""
    rng = np.random.default_rng(seed)
    first = rng.integers(0, ITEMS, n)
    second = (first + rng.integers(1, ITEMS, n)) % ITEMS
    x = np.column_stack([np.ones(n), rng.standard_normal((n, contexts))])
    theta = rng.normal(0, 0.7, (x.shape[1], ITEMS))
    eta = np.einsum("tk,tk->t", x, (theta[:, first] - theta[:, second]).T)
    extra = rng.standard_normal((n, style)) if style else None
    if style:
        eta += extra @ rng.normal(0, 0.5, style)
    labels = (rng.random(n) < expit(eta)).astype(float)
    labels[rng.random(n) < ties] = 0.5
    return x, first, second, labels, extra


def _pair(n=800, seed=0, **kw):
    """The same comparisons indexed (sparse one-hot Φ) and dense."""
    x, first, second, labels, extra = _battles(n, seed, **kw)
    indexed = bl.PreferenceData.from_items(labels, item_1=first, item_0=second, contexts=x,
                                           comparison_features=extra)
    dense = bl.PreferenceData(x, indexed.differences.copy(), labels)
    return indexed, dense


@pytest.mark.parametrize("kw", [{}, {"contexts": 2}, {"style": 3, "ties": 0.2}])
def test_indexed_products_equal_the_dense_ones(kw):
    indexed, dense = _pair(**kw)
    assert indexed.indexed and not dense.indexed
    theta = np.random.default_rng(1).standard_normal((indexed.d_x, indexed.d_phi))
    w = np.random.default_rng(2).standard_normal(indexed.n)
    np.testing.assert_allclose(margins(theta, indexed.contexts, indexed.delta),
                               margins(theta, dense.contexts, dense.differences), atol=1e-12)
    np.testing.assert_allclose(score_matrix(w, indexed.contexts, indexed.delta),
                               score_matrix(w, dense.contexts, dense.differences), atol=1e-10)
    coords = bl.coordinates.VecCoordinates(indexed.d_x, indexed.d_phi)
    np.testing.assert_allclose(bl.design.information(coords, indexed, np.abs(w)),
                               bl.design.information(coords, dense, np.abs(w)), atol=1e-9)


@pytest.mark.parametrize("kw", [{}, {"contexts": 2, "ties": 0.2}])
def test_indexed_fits_and_sets_equal_the_dense_ones(kw):
    indexed, dense = _pair(2000, 3, **kw)
    a, b = bl.fit_mle(indexed), bl.fit_mle(dense)
    np.testing.assert_allclose(a.theta, b.theta, atol=1e-8)
    np.testing.assert_allclose(a.summary().to_frame()["std_err"].to_numpy(),
                               b.summary().to_frame()["std_err"].to_numpy(), rtol=1e-7)
    np.testing.assert_allclose(a.predict_proba(indexed), b.predict_proba(dense), atol=1e-10)


def test_a_dense_item_table_equals_the_sparse_one():
    _, first, second, labels, _ = _battles(600, 4)
    phi = np.random.default_rng(0).standard_normal((ITEMS, 3))
    one = bl.PreferenceData.from_items(labels, item_1=first, item_0=second, item_features=phi)
    two = bl.PreferenceData.from_items(labels, item_1=first, item_0=second,
                                       item_features=sparse.csr_array(phi))
    np.testing.assert_allclose(bl.fit_mle(one).theta, bl.fit_mle(two).theta, atol=1e-10)
    np.testing.assert_allclose(one.differences, phi[first] - phi[second])


@pytest.mark.parametrize("ties", [0.0, 0.25])
def test_counts_equal_expanded_rows(ties):
    x, first, second, labels, _ = _battles(3000, 5, ties=ties, contexts=1)
    x[:, 1] = x[:, 1] > 0  # a binary context: identical rows repeat
    indexed = bl.PreferenceData.from_items(labels, item_1=first, item_0=second, contexts=x)
    counted = indexed.aggregate()
    assert counted.n < indexed.n and counted.n_comparisons == indexed.n
    expanded = repeated_rows(counted, counted.counts.astype(int))
    for cov_type in ("model", "sandwich"):
        a = bl.fit_mle(counted, cov_type=cov_type, tol=1e-12)
        b = bl.fit_mle(expanded, cov_type=cov_type, tol=1e-12)
        np.testing.assert_allclose(a.theta, b.theta, atol=1e-8)
        assert a.nll == pytest.approx(b.nll, rel=1e-10)
        wa, wb = a.calibrated_set(0.9), b.calibrated_set(0.9)
        np.testing.assert_allclose(wa.precision, wb.precision, rtol=1e-8, atol=1e-8)
    assert bl.fit_mle(counted).summary().header["N"] == indexed.n


def test_what_is_printed_counts_the_comparisons_counted_rows_stand_for():
    data = bl.simulate.paper_problem(rank=2, imbalance=3, theta_kind="paper").sample(60, seed=3)
    counted = bl.PreferenceData(data.contexts, data.differences, np.ones(60), counts=np.full(60, 3))
    with pytest.warns(bl.DataWarning, match="all 180 comparisons have y = 1"):
        mle = bl.fit_mle(counted, ridge=1.0)
    assert repr(mle).startswith("MLEResult(N=180,")
    with pytest.warns(bl.DataWarning, match="all 180 comparisons have y = 1"):
        prs = bl.fit_prs(counted, 2, ridge=1.0, n_initial=120)
    assert ", n=60, N0=120," in repr(prs)
    tied = bl.PreferenceData(data.contexts[:4], data.differences[:4], [1, 0.5, 0, 0.5], counts=[5, 2, 1, 3])
    assert repr(tied).endswith("mean(y)=0.682, ties=5, counts=11)")  # (5 + ½·2 + ½·3) / 11; ties 2 + 3


PENALISED = {"mle": lambda d: bl.fit_mle(d, ridge=1.0),
             "low_rank": lambda d: bl.fit_low_rank(d, 2, ridge=1.0),
             "prs": lambda d: bl.fit_prs(d, 2, ridge=1.0),
             # N₀ = 266 of 799 falls inside a counted row, which the split divides
             "prs_split": lambda d: bl.fit_prs(d, 2, ridge=1.0, n_initial=d.n_comparisons // 3),
             "map": lambda d: bl.bayes.fit_posterior(d, 2, method="map", random_seed=0, progressbar=False)}


@pytest.mark.parametrize("fit", sorted(PENALISED))
def test_a_penalty_set_of_counted_rows_is_the_penalty_set_of_the_rows_they_stand_for(fit):
    """The paper's W = Σ_t z_t z_tᵀ and N in C₂·sqrt(k/N) run over comparisons, so rows aggregated with
    their counts give the expanded rows' set (W in each fit's own coordinates, which may differ
    by a reflection: its eigenvalues and the radius)."""
    data = bl.simulate.paper_problem(rank=2, imbalance=3, theta_kind="paper").sample(400, seed=3)
    expanded = repeated_rows(data, 1 + np.arange(data.n) % 3)  # each row 1, 2 or 3 times
    counted = expanded.aggregate()
    assert counted.n == data.n and counted.n_comparisons == expanded.n
    a, b = PENALISED[fit](counted).penalty_set(), PENALISED[fit](expanded).penalty_set()
    assert a.radius == pytest.approx(b.radius, rel=1e-9)
    wa, wb = np.linalg.eigvalsh(a.precision), np.linalg.eigvalsh(b.precision)
    np.testing.assert_allclose(wa, wb, rtol=1e-5, atol=1e-6 * wb.max())


def _full_rank(seed=6, n=2500, ties=0.2):
    """Battles on one-hot features without the first item (a full-rank design, as a GLM needs)."""
    _, first, second, labels, _ = _battles(n, seed, ties=ties)
    phi = np.eye(ITEMS)[:, 1:]
    data = bl.PreferenceData.from_items(labels, item_1=first, item_0=second, item_features=phi)
    return data, data.differences


def test_frequency_weights_match_statsmodels_freq_weights():
    sm = pytest.importorskip("statsmodels.api")
    data, design = _full_rank(ties=0.0)
    counts = np.random.default_rng(1).integers(1, 5, data.n).astype(float)
    counted = bl.PreferenceData(data.contexts, None, data.labels, data.actions, counts=counts,
                                item_features=data.item_features)
    fit = bl.fit_mle(counted, tol=1e-12)
    glm = sm.GLM(data.labels.astype(float), design, family=sm.families.Binomial(), freq_weights=counts).fit(
        tol=1e-13)
    table = fit.summary().to_frame()
    np.testing.assert_allclose(table["estimate"], glm.params, atol=1e-8)
    np.testing.assert_allclose(table["std_err"], glm.bse, rtol=1e-7)


def test_sampling_weights_match_statsmodels_var_weights_hc0():
    sm = pytest.importorskip("statsmodels.api")
    data, design = _full_rank(ties=0.0)
    weights = np.random.default_rng(2).uniform(0.5, 2.0, data.n)
    weighted = bl.PreferenceData(data.contexts, None, data.labels, data.actions, weights=weights,
                                 item_features=data.item_features)
    fit = bl.fit_mle(weighted, tol=1e-12)
    assert fit.covariance == "sandwich"
    glm = sm.GLM(data.labels.astype(float), design, family=sm.families.Binomial(), var_weights=weights).fit(
        tol=1e-13, cov_type="HC0")
    table = fit.summary().to_frame()
    np.testing.assert_allclose(table["estimate"], glm.params, atol=1e-8)
    np.testing.assert_allclose(table["std_err"], glm.bse, rtol=1e-7)
    model = bl.fit_mle(weighted, cov_type="model", tol=1e-12).summary().to_frame()
    plain = sm.GLM(data.labels.astype(float), design, family=sm.families.Binomial(), var_weights=weights).fit(
        tol=1e-13)
    np.testing.assert_allclose(model["std_err"], plain.bse, rtol=1e-7)


@pytest.mark.parametrize("cov_type", ["model", "sandwich"])
def test_ties_match_statsmodels_glm_on_fractional_outcomes(cov_type):
    sm = pytest.importorskip("statsmodels.api")
    data, design = _full_rank(ties=0.2)
    assert data.has_ties
    fit = bl.fit_mle(data, cov_type=cov_type, tol=1e-12)
    glm = sm.GLM(data.labels.astype(float), design, family=sm.families.Binomial()).fit(
        tol=1e-13, cov_type="nonrobust" if cov_type == "model" else "HC0")
    table = fit.summary().to_frame()
    np.testing.assert_allclose(table["estimate"], glm.params, atol=1e-8)
    np.testing.assert_allclose(table["std_err"], glm.bse, rtol=1e-7)
    assert fit.summary().header["covariance"].startswith(cov_type)
    # The set takes the fit's cov_type, and the other on request.
    other = "sandwich" if cov_type == "model" else "model"
    own, asked = fit.calibrated_set(0.9), fit.calibrated_set(0.9, cov_type=other)
    assert not np.allclose(own.precision, asked.precision)


def test_names_travel_from_the_frame_to_every_table():
    x, first, second, labels, _ = _battles(1500, 8, contexts=1)
    names = np.array(["gpt", "claude", "llama", "mistral", "gemma", "qwen"])
    frame = pd.DataFrame({"expert": x[:, 1], "model_a": names[first], "model_b": names[second], "y": labels})
    data = bl.PreferenceData.from_frame(frame, item_columns=("model_a", "model_b"))
    assert data.item_names == tuple(sorted(names)) and data.context_names == ("intercept",)
    board = bl.fit_bradley_terry(data).leaderboard(0.9)
    assert set(board.index) == set(names) and board.index.name == "item"
    assert (board["lower"] < board["rating"]).all() and board["rank"].tolist() == list(range(1, ITEMS + 1))
    assert (board["rank_upper"] <= board["rank"]).all() and (board["rank"] <= board["rank_lower"]).all()
    assert board["comparisons"].sum() == 2 * data.n
    contextual = bl.PreferenceData.from_frame(frame.assign(intercept=1.0),
                                              context_columns=["intercept", "expert"],
                                              item_columns=("model_a", "model_b"))
    mle = bl.fit_mle(contextual).summary().to_frame()
    assert "expert:llama − expert:claude" in mle.index
    prs = bl.fit_prs(contextual, 1).summary().to_frame()
    assert "expert:llama − expert:claude" in prs.index and "11 (u0, v0)" in prs.index


def test_winner_loser_layout_is_not_warned_about(recwarn):
    frame = pd.DataFrame({"winner": ["a", "b", "a", "c", "c"], "loser": ["b", "c", "c", "a", "b"]})
    data = bl.PreferenceData.from_frame(frame, item_columns=("winner", "loser"), label_column=None)
    assert data.winner_first and (data.labels == 1).all()
    bl.fit_bradley_terry(data)
    assert not [w for w in recwarn if issubclass(w.category, bl.DataWarning)]


@pytest.mark.parametrize("kwargs, match", [
    ({"item_1": [0, 7], "item_0": [1, 2]}, r"actions\[1, 1\] = 7, but item_features has 6 rows"),
    ({"item_1": [0, 1], "item_0": [1, -1]}, r"actions\[1, 0\] = -1"),
    ({"item_1": [0, 1], "item_0": [1, 2], "counts": [1, -2]}, r"counts\[1\] = -2.0"),
    ({"item_1": [0, 1], "item_0": [1, 2], "counts": [1, 0.5]}, r"counts\[1\] = 0.5; counts \(frequency"),
    ({"item_1": [0, 1], "item_0": [1, 2], "item_names": list("abcdea")},
     "item_names names 'a' more than once"),
    ({"item_1": [0, 1], "item_0": [1, 2], "item_names": list("abc")}, "item_names has 3 names, expected 6"),
])
def test_bad_input_gets_one_error_naming_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bl.PreferenceData.from_items([1, 0], item_features=np.eye(ITEMS), **kwargs)


def test_an_item_table_of_the_wrong_shape_is_refused():
    with pytest.raises(ValueError, match=r"item_features must be 2-dimensional"):
        bl.PreferenceData.from_items([1, 0], item_1=[0, 1], item_0=[1, 0], item_features=np.ones(3))
    with pytest.raises(ValueError, match="feature_names has 2 names, expected 6"):
        bl.PreferenceData.from_items([1, 0], item_1=[0, 1], item_0=[1, 0], item_features=np.eye(ITEMS),
                                     feature_names=["a", "b"])
    frame = pd.DataFrame({"a": ["x", "y"], "b": ["y", "x"], "y": [1, 0]})
    with pytest.raises(ValueError, match=r"items \['y'\] are compared in the frame but have no row"):
        bl.PreferenceData.from_frame(frame, item_columns=("a", "b"),
                                     item_features=pd.DataFrame({"f": [1.0]}, index=["x"]))
    with pytest.raises(ValueError, match="row 0 compares item 'x' with itself"):
        bl.PreferenceData.from_frame(frame.assign(b=["x", "x"]), item_columns=("a", "b"))
    with pytest.raises(ValueError, match="item column 'b' is missing in row 1"):
        bl.PreferenceData.from_frame(frame.assign(b=["y", None]), item_columns=("a", "b"))


def _named_fit_and_population():
    _, first, second, labels, _ = _battles(1200, 11)
    names = [f"m{a}" for a in range(ITEMS)]
    data = bl.PreferenceData.from_items(labels, item_1=first, item_0=second, item_names=names)
    rng = np.random.default_rng(0)
    features = np.broadcast_to(np.eye(ITEMS), (4, ITEMS, ITEMS)).copy()
    population = bl.Population(rng.normal(size=(4, 3)), features, np.zeros(4, int))
    return bl.fit_bradley_terry(data), population, names


def test_a_plain_bradley_terry_fit_makes_decisions_like_the_others():
    fit, population, names = _named_fit_and_population()
    tied = bl.best_actions(fit, population, 0.9)
    table = tied.to_frame()
    best = names[int(np.argmax(fit.utilities))]
    assert set(table["best"]) == {best}  # every user: the same best item, by name
    policy = bl.pessimistic_policy(fit, population)
    lower = fit.leaderboard(0.9)
    # A plain BT policy picks one item for everyone: the one whose worst case is best, tied with the best.
    assert len(set(policy.actions)) == 1 and names[policy.actions[0]] in lower.index[lower["rank_upper"] == 1]
    assert np.isfinite(fit.loglik) and fit.nll == -fit.loglik


def test_every_frequentist_fit_has_loglik_and_nll():
    indexed, _ = _pair(1500, 12, contexts=2)
    for fit in (bl.fit_mle(indexed), bl.fit_low_rank(indexed, 1), bl.fit_prs(indexed, 1),
                bl.fit_bradley_terry(indexed)):
        assert fit.loglik == -fit.nll and fit.nll > 0, type(fit).__name__


def test_separation_is_named_with_the_items():
    frame = pd.DataFrame({"a": ["x", "y", "z", "x", "y", "w", "w"], "b": ["y", "z", "x", "z", "x", "x", "y"],
                          "y": [1, 0, 1, 0, 1, 1, 1]})
    data = bl.PreferenceData.from_frame(frame, item_columns=("a", "b"))
    with pytest.warns(bl.SeparationWarning, match=r"'w' \(2\), 'z' \(3\) won every comparison"):
        bl.fit_bradley_terry(data)


def test_aggregate_keeps_every_statistic():
    indexed, _ = _pair(2000, 13, ties=0.2)
    compact = indexed.aggregate()
    assert compact.n < indexed.n / 5 and compact.counts.sum() == indexed.n
    a, b = bl.fit_mle(indexed), bl.fit_mle(compact)
    np.testing.assert_allclose(a.theta, b.theta, atol=1e-9)
    assert a.nll == pytest.approx(b.nll, rel=1e-12)
    np.testing.assert_allclose(a.calibrated_set(0.9).precision, b.calibrated_set(0.9).precision, rtol=1e-9)


@pytest.mark.parametrize("kw", [{"contexts": 2}, {"contexts": 2, "style": 2, "ties": 0.2}])
def test_the_low_rank_road_on_indexed_data_equals_the_dense_one(kw):
    indexed, dense = _pair(2500, 14, **kw)
    a, b = bl.fit_low_rank(indexed, 1), bl.fit_low_rank(dense, 1)
    np.testing.assert_allclose(a.theta, b.theta, atol=1e-6)
    assert a.nll == pytest.approx(b.nll, rel=1e-9)
    p, q = bl.fit_prs(indexed, 1), bl.fit_prs(dense, 1)
    np.testing.assert_allclose(p.theta, q.theta, atol=1e-6)
    np.testing.assert_allclose(p.predict_proba(indexed), q.predict_proba(dense), atol=1e-8)


def test_rewards_are_tabled_by_item_name():
    fit, population, names = _named_fit_and_population()
    table = fit.reward(population, level=0.9).to_frame(action_names=fit.data.item_names)
    assert list(table.index.get_level_values("action")[:ITEMS]) == names
    best = table.groupby(level="action")["estimate"].mean().idxmax()
    assert best == names[int(np.argmax(fit.utilities))]


def test_the_row_space_certificate_reads_indexed_data_as_the_dense_one():
    indexed, dense = _pair(n=1600, seed=3, contexts=2)
    low = bl.fit_low_rank(dense.subset(np.arange(800)), 1, ridge=1.0)
    rng = np.random.default_rng(4)
    population = bl.Population(rng.standard_normal((30, indexed.d_x)),
                               np.broadcast_to(np.eye(indexed.d_phi), (30, indexed.d_phi, indexed.d_phi)),
                               np.arange(30))
    rest = np.arange(800, 1600)
    a = bl.certify.certify_row_space(low, indexed.subset(rest), population)
    b = bl.certify.certify_row_space(low, dense.subset(rest), population)
    assert indexed.subset(rest).indexed
    np.testing.assert_allclose(a.lower, b.lower, rtol=1e-8, atol=1e-10)
