"""Cross-validation: the splits (by comparison, by group), the per-fold scores, failures and warnings."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bayes_loco as bl
from bayes_loco.crossval import CrossValidation, cross_validate, fold_indices
from bayes_loco.evaluate import accuracy, brier, log_loss


@pytest.fixture(scope="module")
def data():
    problem = bl.simulate.paper_problem(d_s=4, d_a=6, d_x=6, rank=2, theta_kind="diagonal", seed=0)
    return problem.sample(1200, seed=1)


@pytest.fixture(scope="module")
def users(data):
    return np.random.default_rng(2).integers(0, 37, data.n)


@given(n=st.integers(2, 300), folds=st.integers(2, 10), seed=st.integers(0, 2**31))
@settings(max_examples=60, deadline=None)
def test_folds_by_comparison_are_balanced_and_seeded(n, folds, seed):
    if folds > n:
        with pytest.raises(ValueError, match="folds"):
            fold_indices(n, folds, seed=seed)
        return
    fold_of = fold_indices(n, folds, seed=seed)
    sizes = np.bincount(fold_of, minlength=folds)
    assert fold_of.shape == (n,) and sizes.sum() == n and sizes.max() - sizes.min() <= 1
    np.testing.assert_array_equal(fold_of, fold_indices(n, folds, seed=seed))


@given(sizes=st.lists(st.integers(1, 40), min_size=2, max_size=30), folds=st.integers(2, 8),
       seed=st.integers(0, 2**31), labels=st.sampled_from(["int", "str"]))
@settings(max_examples=80, deadline=None)
def test_every_group_lies_in_exactly_one_test_fold(sizes, folds, seed, labels):
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(len(sizes)), sizes)[rng.permutation(sum(sizes))]
    if labels == "str":
        groups = np.array([f"user-{g}" for g in groups], dtype=object)
    if folds > len(sizes):
        with pytest.raises(ValueError, match="groups"):
            fold_indices(groups.size, folds, groups, seed)
        return
    fold_of = fold_indices(groups.size, folds, groups, seed)
    for g in np.unique(groups):
        assert np.unique(fold_of[groups == g]).size == 1
    load = np.bincount(fold_of, minlength=folds)
    # greedy largest-first: no fold empty, and no two folds apart by more than the largest group
    assert load.min() > 0 and load.max() - load.min() <= max(sizes)


def test_cross_validate_scores_each_fold_on_its_held_out_rows(data, users):
    cv = cross_validate(data, lambda d: bl.fit_prs(d, 2), folds=4, groups=users, seed=3)
    assert isinstance(cv, CrossValidation) and cv.by == "group" and cv.folds == 4
    assert cv.table["n_test"].sum() == data.n
    rows = np.concatenate([np.flatnonzero(cv.fold_of == f) for f in range(4)])
    np.testing.assert_array_equal(np.sort(rows), np.arange(data.n))  # every row in exactly one test fold
    for row in cv.table.itertuples():
        test = cv.fold_of == row.fold
        fit = bl.fit_prs(data.subset(~test), 2)
        held_out = data.subset(test)
        p = fit.predict_proba(held_out)
        assert row.n_train == (~test).sum() and row.n_test == test.sum()
        assert row.log_loss == pytest.approx(log_loss(held_out.labels, p), rel=1e-12)
        assert row.accuracy == pytest.approx(accuracy(held_out.labels, p), rel=1e-12)
        assert row.brier == pytest.approx(brier(held_out.labels, p), rel=1e-12)
    assert cv.mean["log_loss"] == pytest.approx(cv.table["log_loss"].mean())
    assert cv.std_err["brier"] == pytest.approx(cv.table["brier"].std(ddof=1) / 2)
    assert list(cv.summary().columns) == ["mean", "std_err"]
    assert repr(cv).startswith("CrossValidation(4 folds by group: log_loss=")
    # the held-out log-loss of a rank-2 fit is below the coin's log 2
    assert cv.mean["log_loss"] + 3 * cv.std_err["log_loss"] < np.log(2)


def test_counted_folds_are_sized_and_scored_by_the_comparisons_they_stand_for(data):
    f = 1.0 + np.arange(data.n) % 4
    counted = bl.PreferenceData(data.contexts, data.differences, data.labels, counts=f)
    cv = cross_validate(counted, lambda d: bl.fit_prs(d, 2), folds=3, seed=1)
    assert cv.table["n_test"].sum() == counted.n_comparisons
    for row in cv.table.itertuples():
        test = cv.fold_of == row.fold
        assert (row.n_train, row.n_test) == (f[~test].sum(), f[test].sum())
        held_out = counted.subset(test)
        p = bl.fit_prs(counted.subset(~test), 2).predict_proba(held_out)
        assert row.log_loss == pytest.approx(log_loss(held_out.labels, p, f[test]), rel=1e-12)


def test_unseen_users_never_leak_into_training(data, users):
    seen = []

    def fit_fn(train):
        seen.append(train.fingerprint)
        return bl.fit_mle(train)

    cv = cross_validate(data, fit_fn, folds=3, groups=users, seed=0)
    for f in range(3):
        test_users = set(users[cv.fold_of == f])
        train_users = set(users[cv.fold_of != f])
        assert not test_users & train_users
        assert data.subset(cv.fold_of != f).fingerprint == seen[f]


def test_a_failing_fold_is_named(data):
    calls = []

    def fit_fn(train):
        calls.append(train.n)
        if len(calls) == 3:
            raise np.linalg.LinAlgError("singular")
        return bl.fit_mle(train)

    with pytest.raises(np.linalg.LinAlgError, match="singular") as info:
        cross_validate(data, fit_fn, folds=4)
    assert any("in fold 2 (3 of 4;" in note for note in info.value.__notes__)


def test_warnings_are_carried_and_reissued(data, capsys):
    def fit_fn(train):
        warnings.warn("something odd", bl.DataWarning, stacklevel=1)
        return bl.fit_mle(train)

    with pytest.warns(bl.DataWarning, match=r"fold \d: something odd"):
        cv = cross_validate(data, fit_fn, folds=2, progress=True)
    assert cv.warnings == ("fold 0: DataWarning: something odd", "fold 1: DataWarning: something odd")
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("fold 0 (1 of 2): 600 train, 600 test, log-loss ")


def test_splits_are_seeded(data):
    a = cross_validate(data, bl.fit_mle, folds=3, seed=4)
    b = cross_validate(data, bl.fit_mle, folds=3, seed=4)
    c = cross_validate(data, bl.fit_mle, folds=3, seed=5)
    np.testing.assert_array_equal(a.fold_of, b.fold_of)
    assert a.table["log_loss"].tolist() == b.table["log_loss"].tolist()
    assert not np.array_equal(a.fold_of, c.fold_of)
    assert a.by == "comparison" and a.seed == 4


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"folds": 1}, ValueError, "folds must be"),
    ({"folds": 2.5}, TypeError, "folds must be an integer"),
    ({"groups": np.arange(5)}, ValueError, r"groups must hold one label per comparison \(1200\)"),
    ({"groups": np.zeros(1200), "folds": 2}, ValueError, "more than the 1 groups"),
    ({"groups": np.r_[np.nan, np.arange(1199.0)]}, ValueError, r"groups\[0\] is missing"),
    ({"seed": -1}, ValueError, "seed"),
])
def test_bad_arguments_name_themselves(data, kwargs, error, match):
    with pytest.raises(error, match=match):
        cross_validate(data, bl.fit_mle, **kwargs)


def test_fit_fn_and_data_are_checked(data):
    with pytest.raises(TypeError, match="fit_fn must be a function"):
        cross_validate(data, "fit_mle")
    with pytest.raises(TypeError, match="data must be a PreferenceData"):
        cross_validate(data.contexts, bl.fit_mle)
