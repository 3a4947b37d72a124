"""The bad-input catalogue for data, problems, fits, coordinates, sets, policies and evaluation.

Every case feeds one public entry point one bad input and asserts what a user should
see: one error raised inside bayes_loco that names the argument (or field) and what
was wrong (:func:`refused`), or a warning and a result that is right (:func:`warned`).
A hand-built or loaded object is refused where it is made, by its constructor.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pandas as pd
import pytest
from catalogue import refused, warned
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bayes_loco as bl
from bayes_loco import simulate
from bayes_loco.coordinates import rtv_basis
from bayes_loco.design import design, identified_directions, information

pytestmark = pytest.mark.catalogue

N, D_X, D_PHI, A = 40, 3, 4, 3


@pytest.fixture(scope="module")
def world():
    """Small valid objects of every kind, each case breaking one of them."""
    rng = np.random.default_rng(0)
    problem = simulate.paper_problem(d_s=2, d_a=4, d_x=3, rank=2, seed=0)  # d_φ = 3 + 2 = 5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bl.BayesLocoWarning)
        data = problem.sample(400, seed=1)
        other = problem.sample(400, seed=2)
        mle = bl.fit_mle(data, ridge=1.0)
        low = bl.fit_low_rank(data, 2, ridge=1.0, initial=mle)
        other_low = bl.fit_low_rank(other, 2, ridge=1.0)
        prs = bl.fit_prs(data, 2, ridge=1.0, low_rank=low)
        other_d_phi = simulate.paper_problem(d_s=3, d_a=4, d_x=3, rank=2, seed=0).sample(200, seed=3)
        other_mle = bl.fit_mle(other_d_phi, ridge=1.0)
    pop = problem.population(12, seed=3)
    pop_global = problem.population(4, seed=3, contexts_per_state=5, context_law="target")
    other_global = problem.population(4, seed=4, contexts_per_state=5, context_law="target")
    gram = prs.penalty_set()
    wald = prs.calibrated_set(0.9)
    k = prs.k
    draws = prs.theta_rtv + 0.1 * rng.normal(size=(30, k))
    w = np.eye(k) + 0.1
    return dict(
        rng=rng, problem=problem, data=data, other=other, mle=mle, low=low, other_low=other_low, prs=prs,
        other_mle=other_mle, pop=pop, pop_global=pop_global, other_global=other_global, gram=gram, wald=wald,
        k=k, basis=prs.basis, w=w, draws_set=bl.DrawsSet(draws, prs.basis),
        quantile_set=bl.QuantileSet(draws, prs.basis),
        policy=bl.pessimistic_policy(gram, pop),
        global_policy=bl.pessimistic_policy(wald, pop_global, scope="global"),
        x=rng.uniform(-1, 1, (N, D_X)), d=rng.normal(size=(N, D_PHI)), y=rng.integers(0, 2, N),
        px=rng.uniform(-1, 1, (6, D_X)), pf=rng.normal(size=(6, A, D_PHI)), ps=np.arange(6),
    )


def _replace(obj, **changes):
    return lambda: dataclasses.replace(obj, **changes)


# ------------------------------------------------------------------------ arrays a user may pass


def _bad_arrays(shape):
    """(id, bad value, match) for an array argument of ``shape``; the match follows the argument's name."""
    rng = np.random.default_rng(1)
    good = rng.normal(size=shape)

    def poke(value):
        arr = good.copy()
        arr.flat[1] = value
        return arr

    obj = good.astype(object)
    obj.flat[2] = None
    text = good.astype(object)
    text.flat[0] = "1.5"
    return [
        ("complex", good + 1j, r"must be numeric and real, got complex.*\.real"),
        ("datetime", np.full(shape, np.datetime64("2024-01-01")), r"must be numeric, got datetime64.*dates"),
        ("timedelta", np.full(shape, np.timedelta64(3, "D")), r"must be numeric, got timedelta64"),
        ("strings", good.astype(str), r"must be numeric, got strings.*astype\(float\)"),
        ("none-entry", obj, r"must be numeric, but .*\[.*\] is None"),
        ("string-entry", text, r"must be numeric, but .*\[.*\] is '1.5'"),
        ("nan", poke(np.nan), r"contains NaN or infinity, first at"),
        ("inf", poke(np.inf), r"contains NaN or infinity"),
        ("-inf", poke(-np.inf), r"contains NaN or infinity"),
        ("huge-1e300", good * 1e300, r"magnitude .*e\+(2|3)\d\d.*above 1e\+50.*[Rr]escale"),
        ("huge-1e150", good * 1e150, r"magnitude .*e\+1\d\d.*[Rr]escale"),
        ("huge-one", poke(-1e60), r"magnitude 1e\+60 at .*\[.*\].*[Rr]escale"),
        ("wrong-ndim", good.reshape(-1), r"must be \d-dimensional, got shape"),
        ("empty", np.zeros((0, *shape[1:])), r"is empty"),
    ]


@pytest.mark.parametrize("argument", ["contexts", "differences"])
@pytest.mark.parametrize(("case", "value", "match"), _bad_arrays((N, 3)),
                         ids=[c[0] for c in _bad_arrays((N, 3))])
def test_preference_data_refuses_bad_arrays(world, argument, case, value, match):
    """Complex, dates, strings, None, NaN, infinities and huge finite values, in either array."""
    arrays = {"contexts": world["x"], "differences": world["d"], argument: value}
    refused(lambda: bl.PreferenceData(arrays["contexts"], arrays["differences"], world["y"]),
            match=f"^{argument}.*{match}")


@pytest.mark.parametrize("argument", ["features_1", "features_0"])
@pytest.mark.parametrize(("case", "value", "match"), _bad_arrays((N, D_PHI))[:12],
                         ids=[c[0] for c in _bad_arrays((N, D_PHI))[:12]])
def test_from_arrays_refuses_bad_features(world, argument, case, value, match):
    features = {"features_1": world["d"], "features_0": np.zeros((N, D_PHI))}
    features[argument] = value
    refused(lambda: bl.PreferenceData.from_arrays(world["x"], world["y"], **features),
            match=f"{argument}.*{match}")


@pytest.mark.parametrize(("labels", "match"), [
    ([None] + [1] * (N - 1), r"labels must be 0/1 numbers, but labels\[0\] is None.*missing"),
    (np.array(["yes", "no"] * (N // 2)),
     r"labels must be 0/1 numbers, got strings \(e\.g\. 'yes'\).*== 'yes'"),
    (np.array(["yes", "no"] * (N // 2), dtype=object), r"labels must be 0/1 numbers, got strings.*'yes'"),
    (np.array(["0", "1"] * (N // 2)),
     r"labels must be 0/1 numbers, got strings \(e\.g\. '0'\).*astype\(int\)"),
    (pd.Series(["1", "0"] * (N // 2)).to_numpy(), r"labels .*strings \(e\.g\. '1'\)"),
    (np.array([b"0", b"1"] * (N // 2)), r"labels .*strings"),
    (np.r_[np.nan, np.ones(N - 1)], r"labels\[0\] is nan.*missing"),
    (np.r_[np.ones(N - 1), np.inf], rf"labels\[{N - 1}\] is inf"),
    (np.r_[2, np.ones(N - 1)], r"labels\[0\] = 2(\.0)?, expected 0, 0.5 \(a tie\) or 1"),
    (np.r_[1, -1, np.ones(N - 2)], r"labels\[1\] = -1(\.0)?, expected 0, 0.5 \(a tie\) or 1"),
    (np.r_[0.25, np.ones(N - 1)], r"labels\[0\] = 0.25, expected 0, 0.5 \(a tie\) or 1"),
    (np.ones((N, 1)), r"labels must be 1-dimensional, got shape"),
    (np.ones(N - 1), rf"contexts has {N} rows, labels has {N - 1}"),
    (np.ones(N) + 0j, r"labels must be 0/1 numbers and real, got complex"),
    (np.full(N, np.datetime64("2024-01-01")), r"labels must be 0/1 numbers, got datetime64"),
    ([{"y": 1}] * N, r"labels must be 0/1 numbers, but labels\[0\] is \{'y': 1\}"),
], ids=["none", "yes-no", "yes-no-object", "string-01", "pandas-strings", "bytes", "nan", "inf", "two",
        "minus-one",
        "half", "2d", "short", "complex", "datetime", "dicts"])
def test_preference_data_refuses_bad_labels(world, labels, match):
    refused(lambda: bl.PreferenceData(world["x"], world["d"], labels), match=match)


def test_preference_data_accepts_bool_and_object_int_labels(world):
    """Bool labels and an object column of 0/1 ints (pandas) are labels, not errors."""
    as_bool = bl.PreferenceData(world["x"], world["d"], world["y"].astype(bool))
    as_object = bl.PreferenceData(world["x"], world["d"], world["y"].astype(object))
    np.testing.assert_array_equal(as_bool.labels, world["y"])
    np.testing.assert_array_equal(as_object.labels, world["y"])


@pytest.mark.parametrize(("call", "match"), [
    (lambda w: bl.PreferenceData(w["x"], w["d"][:-1], w["y"]),
     rf"contexts has {N} rows, differences has {N - 1}"),
    (lambda w: bl.PreferenceData.from_arrays(w["x"], w["y"], differences=w["d"], features_1=w["d"]),
     "either differences or features_1 and features_0, not both"),
    (lambda w: bl.PreferenceData.from_arrays(w["x"], w["y"], features_1=w["d"]),
     "features_1 and features_0 are both required"),
    (lambda w: bl.PreferenceData.from_arrays(w["x"], w["y"], features_1=w["d"], features_0=w["d"][:, :2]),
     r"features_1 has shape .*features_0 has shape"),
    (lambda w: bl.PreferenceData.from_arrays(w["x"][:-1], w["y"], features_1=w["d"], features_0=w["d"]),
     rf"contexts has {N - 1} rows, features_1 has {N}"),
    (lambda w: bl.PreferenceData.from_arrays(w["x"], w["y"], differences=w["d"], copy="yes"),
     "copy must be a bool"),
    (lambda w: bl.PreferenceData(w["x"], w["d"], w["y"], np.zeros((N, 3), int)),
     rf"actions must be an integer array of shape \({N}, 2\)"),
    (lambda w: bl.PreferenceData(w["x"], w["d"], w["y"], np.zeros((N, 2))),
     "actions must be an integer array"),
], ids=["rows", "both", "one-feature", "feature-shapes", "feature-rows", "copy", "actions-shape",
        "actions-float"])
def test_preference_data_refuses_inconsistent_arguments(world, call, match):
    refused(lambda: call(world), match=match)


# --------------------------------------------------------------------------------- from_frame


def _frame(world):
    frame = pd.DataFrame(world["x"], columns=["x0", "x1", "x2"])
    for j in range(D_PHI):
        frame[f"d{j}"] = world["d"][:, j]
    frame["y"] = world["y"]
    return frame


DIFFS = [f"d{j}" for j in range(D_PHI)]


@pytest.mark.parametrize(("edit", "kwargs", "match"), [
    (lambda f: f.set_axis(["x0", "x1", "x1", *DIFFS, "y"], axis=1), {},
     r"duplicated column names \['x1'\].*rename"),
    (None, {"context_columns": ["x0", "x9"]}, r"frame is missing columns \['x9'\]"),
    (None, {"context_columns": "x0"}, "context_columns must be a sequence of column names"),
    (None, {"context_columns": []}, "context_columns is empty"),
    (None, {"context_columns": ["x0", "x0"]}, "context_columns names a column twice"),
    (None, {"difference_columns": [0, 1]}, "difference_columns must be a sequence of column names"),
    (None, {"label_column": 3}, "label_column must be a column name"),
    (lambda f: f.assign(y=np.where(f["y"] == 1, "yes", "no")), {},
     r"label_column 'y' holds strings \(e\.g\. '(yes|no)'\); labels must be 0/1 numbers.*== 'yes'"),
    (lambda f: f.assign(y=f["y"].astype(str)), {},
     r"label_column 'y' holds strings \(e\.g\. '[01]'\).*astype\(int\)"),
    (lambda f: f.assign(y=f["y"].astype(object).where(f.index > 0, None)), {}, r"labels\[0\] is None"),
    (lambda f: f.assign(x1=pd.Timestamp("2024-01-01")), {},
     r"contexts must be numeric, but contexts\[\(0, 1\)\] is "
     "Timestamp"),
    (lambda f: f.assign(d0=f["d0"] * 1e200), {}, r"differences has an entry of magnitude .*[Rr]escale"),
], ids=["duplicated", "missing", "string-columns", "empty-columns", "repeated", "int-columns", "label-int",
        "yes-no", "string-labels", "none-label", "datetime", "huge"])
def test_from_frame_refuses_bad_frames(world, edit, kwargs, match):
    frame = _frame(world) if edit is None else edit(_frame(world))
    options = {"context_columns": ["x0", "x1", "x2"], "difference_columns": DIFFS, **kwargs}
    refused(lambda: bl.PreferenceData.from_frame(frame, **options), match=match)


def test_from_frame_refuses_a_non_frame(world):
    refused(lambda: bl.PreferenceData.from_frame(world["x"], context_columns=["x0"],
                                                 difference_columns=["d0"]),
            match="frame must be a pandas DataFrame, got ndarray")


# --------------------------------------------------------------------------------- Population


@pytest.mark.parametrize("argument", ["contexts", "features"])
@pytest.mark.parametrize(("case", "value", "match"), _bad_arrays((6, A))[:12],
                         ids=[c[0] for c in _bad_arrays((6, A))[:12]])
def test_population_refuses_bad_arrays(world, argument, case, value, match):
    arrays = {"contexts": world["px"], "features": world["pf"]}
    if argument == "features":
        value = np.repeat(value[:, :, None], D_PHI, axis=2)
    arrays[argument] = value
    refused(lambda: bl.Population(arrays["contexts"], arrays["features"], world["ps"]),
            match=f"{argument}.*{match}")


@pytest.mark.parametrize(("change", "match"), [
    ({"states": np.arange(6.0)}, r"states must be an integer array of shape \(6,\)"),
    ({"states": np.arange(5)}, r"states must be an integer array of shape \(6,\)"),
    ({"states": np.zeros((6, 1), int)}, r"states must be an integer array"),
    ({"features": np.ones((6, D_PHI))}, r"features must be 3-dimensional"),
    ({"features": np.ones((5, A, D_PHI))}, "contexts has 6 rows, features has 5"),
    ({"contexts": np.ones(6)}, r"contexts must be 2-dimensional"),
], ids=["float-states", "short-states", "2d-states", "2d-features", "rows", "1d-contexts"])
def test_population_refuses_inconsistent_arrays(world, change, match):
    arrays = {"contexts": world["px"], "features": world["pf"], "states": world["ps"], **change}
    refused(lambda: bl.Population(**arrays), match=match)


def test_population_with_contexts_times_1e300_is_refused(world):
    """Regression: this population gave the reference action everywhere, status solved, gap 0."""
    pop = world["pop"]
    refused(lambda: bl.Population(pop.contexts * 1e300, pop.features, pop.states),
            match=r"contexts has an entry of magnitude .*e\+(299|300).*above 1e\+50.*Rescale contexts")


# ------------------------------------------------------------------------- simulate and Problem


@pytest.mark.parametrize(("kwargs", "exc", "match"), [
    ({"d_s": 0}, ValueError, "d_s must be >= 1, got 0"),
    ({"d_a": 1}, ValueError, "d_a must be >= 2, got 1"),
    ({"d_x": 0}, ValueError, "d_x must be >= 1"),
    ({"rank": 0}, ValueError, r"rank must be in \[1, 20\]"),
    ({"rank": 21}, ValueError, r"rank must be in \[1, 20\], got 21"),
    ({"rank": 2.5}, TypeError, "rank must be an integer"),
    ({"imbalance": 0.5}, ValueError, r"imbalance must be in \[1.0, inf\]"),
    ({"imbalance": float("nan")}, ValueError, "imbalance must be in"),
    ({"imbalance": "3"}, TypeError, "imbalance must be a real number"),
    ({"theta_kind": "nonsense"}, ValueError, "theta_kind must be one of 'paper', 'diagonal'"),
    ({"noise_dims": -1}, ValueError, "noise_dims must be >= 0"),
    ({"covered_action": 0}, ValueError, r"covered_action must be in \[1, 9\]"),
    ({"covered_action": 10}, ValueError, r"covered_action must be in \[1, 9\]"),
    ({"seed": "a"}, TypeError, "seed must be a non-negative int, a SeedSequence or a Generator, got 'a'"),
    ({"seed": -1}, ValueError, "seed must be a non-negative int, got -1"),
    ({"seed": 1.5}, TypeError, "seed must be a non-negative int"),
    ({"seed": None}, ValueError, "seed must be given"),
    ({"theta_kind": "diagonal", "rank": 10}, ValueError, "rank must be <= d_a - 1 = 9 for kind='diagonal'"),
], ids=["d_s", "d_a", "d_x", "rank0", "rank-big", "rank-float", "imbalance", "imbalance-nan", "imbalance-str",
        "theta-kind", "noise", "covered0", "covered-big", "seed-str", "seed-negative", "seed-float",
        "seed-none",
        "diagonal-rank"])
def test_paper_problem_refuses_bad_arguments(kwargs, exc, match):
    refused(lambda: simulate.paper_problem(**kwargs), match=match, exc=exc)


@pytest.mark.parametrize(("call", "exc", "match"), [
    (lambda p: p.sample(10, seed="a"), TypeError, "seed must be a non-negative int.*got 'a'"),
    (lambda p: p.sample(10, seed=-1), ValueError, "seed must be a non-negative int, got -1"),
    (lambda p: p.sample(10, seed=2.0), TypeError, "seed must be a non-negative int"),
    (lambda p: p.sample(10, seed=None), ValueError, "seed must be given"),
    (lambda p: p.sample(10, seed=True), TypeError, "seed must be a non-negative int"),
    (lambda p: p.sample(0, seed=1), ValueError, "n must be >= 1, got 0"),
    (lambda p: p.sample("10", seed=1), TypeError, "n must be an integer"),
    (lambda p: p.population(0, seed=1), ValueError, "n_states must be >= 1"),
    (lambda p: p.population(5, seed=1, contexts_per_state=0), ValueError, "contexts_per_state must be >= 1"),
    (lambda p: p.population(5, seed=1, context_law="nonsense"), ValueError,
     "context_law must be one of 'uniform', 'shifted', 'target'"),
    (lambda p: p.population(5, seed="b"), TypeError, "seed must be a non-negative int"),
    (lambda p: p.population(5, seed=-3), ValueError, "seed must be a non-negative int, got -3"),
], ids=["sample-seed-str", "sample-seed-negative", "sample-seed-float", "sample-seed-none",
        "sample-seed-bool",
        "sample-n0", "sample-n-str", "population-n0", "population-m0", "population-law",
        "population-seed-str",
        "population-seed-negative"])
def test_problem_methods_refuse_bad_arguments(world, call, exc, match):
    refused(lambda: call(world["problem"]), match=match, exc=exc)


def test_problem_accepts_a_generator_and_a_seed_sequence(world):
    problem = world["problem"]
    a = problem.sample(5, seed=np.random.default_rng(7))
    b = problem.sample(5, seed=np.random.SeedSequence(7))
    np.testing.assert_array_equal(a.contexts, b.contexts)
    assert isinstance(problem, bl.Problem)


# ---------------------------------------------------------------------------------------- fits


NOT_DATA = [(np.ones((3, 3)), "ndarray"), (None, "NoneType"), (pd.DataFrame({"y": [1]}), "DataFrame")]


@pytest.mark.parametrize("fit", ["fit_mle", "fit_low_rank", "fit_prs", "select_rank", "spectral_start"])
@pytest.mark.parametrize(("value", "kind"), NOT_DATA, ids=[k for _, k in NOT_DATA])
def test_fits_refuse_what_is_not_data(fit, value, kind):
    args = () if fit in ("fit_mle", "select_rank") else (2,)
    refused(lambda: getattr(bl, fit)(value, *args), match=f"data must be a PreferenceData, got {kind}",
            exc=TypeError)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"ridge": -1.0}, r"ridge must be in \[0.0, inf\], got -1.0"),
    ({"ridge": float("nan")}, "ridge must be in"),
    ({"ridge": "1"}, "ridge must be a real number"),
    ({"max_iter": 0}, "max_iter must be >= 1"),
    ({"max_iter": 2.5}, "max_iter must be an integer"),
    ({"tol": 0.0}, r"tol must be in \(0.0, inf\]"),
    ({"tol": -1e-8}, "tol must be in"),
], ids=["ridge-negative", "ridge-nan", "ridge-str", "max-iter-0", "max-iter-float", "tol-0", "tol-negative"])
def test_fit_mle_refuses_bad_options(world, kwargs, match):
    refused(lambda: bl.fit_mle(world["data"], **kwargs), match=match)


@pytest.mark.parametrize(("args", "kwargs", "match"), [
    ((0,), {}, r"rank must be in \[1, 3\], got 0"),
    ((4,), {}, r"rank must be in \[1, 3\], got 4"),
    ((1.5,), {}, "rank must be an integer"),
    (("2",), {}, "rank must be an integer"),
    ((2,), {"method": "newton"}, "method must be one of 'lbfgs', 'alternating'"),
    ((2,), {"start": "random"}, "start must be one of 'auto', 'mle', 'spectral'"),
    ((2,), {"max_iter": 0}, "max_iter must be >= 1"),
    ((2,), {"tol": float("nan")}, "tol must be in"),
    ((2,), {"ridge": -2.0}, "ridge must be in"),
], ids=["rank0", "rank-big", "rank-float", "rank-str", "method", "start", "max-iter", "tol", "ridge"])
def test_fit_low_rank_refuses_bad_options(world, args, kwargs, match):
    refused(lambda: bl.fit_low_rank(world["data"], *args, **kwargs), match=match)


def test_fit_low_rank_refuses_an_initial_fit_of_other_dimensions(world):
    """Regression: this ended in a matmul error inside fgd.py."""
    refused(lambda: bl.fit_low_rank(world["data"], 2, initial=world["other_mle"]),
            match=r"initial was fitted on data with \(d_x, d_phi\) = \(3, 6\), these data have \(3, 5\)")


@pytest.mark.parametrize(("initial", "kwargs", "exc", "match"), [
    ("low", {}, TypeError, "initial must be a MLEResult .*fit_mle.*got LowRankResult"),
    ("theta", {}, TypeError, "initial must be a MLEResult .*got ndarray"),
    ("mle", {"start": "spectral"}, ValueError, "cannot be combined with start='spectral'"),
], ids=["low-rank", "array", "spectral"])
def test_fit_low_rank_refuses_a_wrong_initial(world, initial, kwargs, exc, match):
    start = world["mle"].theta if initial == "theta" else world[initial]
    refused(lambda: bl.fit_low_rank(world["data"], 2, initial=start, **kwargs), match=match, exc=exc)


def test_fit_low_rank_warns_for_an_initial_fit_of_other_data_and_fits_these(world):
    """An MLE of other data of the same shape only starts FGD: warned, and the fit is these data's."""
    other_mle = bl.fit_mle(world["other"], ridge=1.0)
    fit = warned(lambda: bl.fit_low_rank(world["data"], 2, ridge=1.0, initial=other_mle),
                 match="initial was fitted on other data", category=bl.DataWarning)
    assert fit.data is world["data"] and fit.diagnostics.converged
    assert np.linalg.norm(fit.theta - world["low"].theta) <= 1e-3 * np.linalg.norm(world["low"].theta)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"rank": 0}, r"rank must be in \[1, 3\]"),
    ({"rank": 2, "n_initial": 0}, r"n_initial must be in \[1, 399\], got 0"),
    ({"rank": 2, "n_initial": 400}, r"n_initial must be in \[1, 399\], got 400"),
    ({"rank": 2, "n_initial": 0.5}, "n_initial must be an integer"),
    ({"rank": 2, "ridge": -1.0}, "ridge must be in"),
], ids=["rank0", "n-initial-0", "n-initial-n", "n-initial-float", "ridge"])
def test_fit_prs_refuses_bad_options(world, kwargs, match):
    refused(lambda: bl.fit_prs(world["data"], **kwargs), match=match)


@pytest.mark.parametrize(("low_rank", "kwargs", "exc", "match"), [
    ("other_low", {}, ValueError,
     "low_rank was fitted on other data than data.*fit_low_rank\\(data, rank\\)"),
    ("low", {"n_initial": 200}, ValueError,
     r"low_rank was fitted on other data than the first n_initial = 200.*data\.split\(n_initial\)\[0\]"),
    ("low", {"rank": 1}, ValueError, "low_rank has rank 2, but rank=1 was asked for"),
    ("mle", {}, TypeError, "low_rank must be a LowRankResult .*got MLEResult"),
], ids=["other-data", "not-the-split", "rank", "mle"])
def test_fit_prs_refuses_a_low_rank_start_of_other_data(world, low_rank, kwargs, exc, match):
    """Regression: a start fitted on other data was accepted (Θ error 1.25 → 1.55)."""
    options = {"rank": 2, **kwargs}
    refused(lambda: bl.fit_prs(world["data"], low_rank=world[low_rank], **options), match=match, exc=exc)


@pytest.mark.parametrize(("ranks", "kwargs", "exc", "match"), [
    (5, {}, TypeError,
     r"ranks must be a sequence of candidate ranks, e.g. \[5\] or range\(1, 6\), got int 5"),
    ("2", {}, TypeError, "ranks must be a sequence of candidate ranks"),
    ([], {}, ValueError, "ranks is empty"),
    ([0, 1], {}, ValueError, r"rank must be in \[1, 3\], got 0"),
    ([1, 9], {}, ValueError, r"rank must be in \[1, 3\], got 9"),
    ([1.5], {}, TypeError, "rank must be an integer"),
    ([1, 2], {"penalty": -1.0}, ValueError, "penalty must be in"),
], ids=["int", "str", "empty", "zero", "big", "float", "penalty"])
def test_select_rank_refuses_bad_ranks(world, ranks, kwargs, exc, match):
    refused(lambda: bl.select_rank(world["data"], ranks, **kwargs), match=match, exc=exc)


@pytest.mark.parametrize(("args", "kwargs", "match"), [
    ((0,), {}, "rank must be in"), ((9,), {}, "rank must be in"), ((2,), {"ridge": -1.0}, "ridge must be in"),
], ids=["rank0", "rank-big", "ridge"])
def test_spectral_start_refuses_bad_options(world, args, kwargs, match):
    refused(lambda: bl.spectral_start(world["data"], *args, **kwargs), match=match)


def test_constant_labels_are_warned_and_fitted_as_the_flipped_data(world):
    """Labels all 1 are a valid encoding (no intercept): warned, and the fit equals that of (−Δφ, 0) rows."""
    data = world["data"]
    flip = np.where(data.labels == 1, 1.0, -1.0)[:, None]
    ones = bl.PreferenceData(data.contexts, data.differences * flip, np.ones(data.n, int))
    fit = warned(lambda: bl.fit_mle(ones, ridge=1.0), match="all 400 comparisons have y = 1",
                 category=bl.DataWarning)
    np.testing.assert_allclose(fit.theta, world["mle"].theta, rtol=1e-6, atol=1e-8)


# ------------------------------------------------------------------- hand-built or tampered fits


@pytest.mark.parametrize(("fit", "changes", "match"), [
    ("prs", lambda w: {"theta_rtv": np.full(w["k"], np.nan)}, r"theta_rtv contains NaN or infinity"),
    ("prs", lambda w: {"theta_rtv": np.zeros(w["k"] - 1)}, r"theta_rtv must have shape \(12,\)"),
    ("prs", lambda w: {"gram": np.eye(3)}, r"gram must have shape \(12, 12\)"),
    ("prs", lambda w: {"low_rank": w["mle"]}, "low_rank must be a LowRankResult, got MLEResult"),
    ("prs", lambda w: {"basis": bl.VecCoordinates(3, 5)}, "basis must be a RTVBasis, got VecCoordinates"),
    ("prs", lambda w: {"estimation_data": w["data"].contexts}, "estimation_data must be a PreferenceData"),
    ("prs", lambda w: {"n_initial": 0}, "n_initial must be >= 1"),
    ("prs", lambda w: {"nll": float("nan")}, "nll must be finite"),
    ("prs", lambda w: {"diagnostics": "converged"}, "diagnostics must be a Diagnostics, got str"),
    ("mle", lambda w: {"theta": np.full((3, 5), np.inf)}, "theta contains NaN or infinity"),
    ("mle", lambda w: {"theta": np.zeros((5, 3))},
     r"theta must have shape \(3, 5\) \(d_x, d_phi\) of its data"),
    ("mle", lambda w: {"ridge": -1.0}, "ridge must be in"),
    ("mle", lambda w: {"nll": -3.0}, "nll .* must be >= 0"),
    ("low", lambda w: {"left": np.zeros((3, 1))}, r"left must have shape \(3, 2\)"),
    ("low", lambda w: {"right": np.full((5, 2), np.nan)}, "right contains NaN"),
    ("low", lambda w: {"rank": 7}, r"rank must be in \[1, 3\], got 7"),
    ("low", lambda w: {"start": "auto"}, "start must be one of 'mle', 'spectral'"),
    ("low", lambda w: {"initial": w["other_mle"]}, r"initial.theta must have shape \(3, 5\)"),
    ("low", lambda w: {"grad_norm": float("inf")}, "grad_norm must be finite"),
], ids=["prs-nan", "prs-length", "prs-gram", "prs-low-rank", "prs-basis", "prs-data", "prs-n-initial",
        "prs-nll",
        "prs-diagnostics", "mle-inf", "mle-shape", "mle-ridge", "mle-nll", "low-left", "low-right",
        "low-rank",
        "low-start", "low-initial", "low-grad"])
def test_fits_refuse_tampered_fields(world, fit, changes, match):
    refused(_replace(world[fit], **changes(world)), match=match)


@pytest.mark.parametrize(("changes", "match"), [
    ({"status": "converged"}, "status must be a FitStatus, got str"),
    ({"n_iter": -1}, "n_iter must be >= 0"),
    ({"converged": "yes"}, "converged must be a bool"),
    ({"method": 3}, "method must be a str"),
], ids=["status", "n-iter", "converged", "method"])
def test_diagnostics_refuse_tampered_fields(world, changes, match):
    refused(_replace(world["prs"].diagnostics, **changes), match=match)


def test_rank_selection_refuses_mismatched_fields(world):
    low = world["low"]
    selection = bl.RankSelection(np.array([2]), np.array([1.0]), np.array([1.0]), np.array([11]), 0.1, (low,))
    refused(_replace(selection, ranks=np.array([1])), match=r"fits\[0\] has rank 2, but ranks\[0\] = 1")
    refused(_replace(selection, gic=np.array([1.0, 2.0])),
            match=r"gic must have shape \(1,\) \(one per rank\)")
    refused(_replace(selection, fits=(low, low)), match=r"fits must hold one fit per rank \(1\), got 2")
    refused(_replace(selection, ranks=np.array([2.0])), match="ranks must be a non-empty 1-d integer array")


# -------------------------------------------------------------------------------- coordinates


@pytest.mark.parametrize(("call", "match"), [
    (lambda w: rtv_basis(np.full((3, 5), np.nan), 2), "theta_hat contains NaN"),
    (lambda w: rtv_basis(np.ones(5), 1), "theta_hat must be 2-dimensional"),
    (lambda w: rtv_basis(np.ones((3, 5)), 0), r"rank must be in \[1, 3\]"),
    (lambda w: rtv_basis(np.ones((3, 5)), 4), r"rank must be in \[1, 3\], got 4"),
    (lambda w: rtv_basis(np.ones((3, 5)) + 1j, 1), "theta_hat must be numeric and real"),
    (lambda w: bl.VecCoordinates(0, 3), "d_x must be >= 1, got 0"),
    (lambda w: bl.VecCoordinates(2, 1.5), "d_phi must be an integer"),
    (lambda w: bl.RTVBasis(np.eye(3)[:, :2], np.eye(5), 2), r"left must have shape \(3, 3\)"),
    (lambda w: bl.RTVBasis(np.eye(3), np.full((5, 5), np.nan), 2), "right contains NaN"),
    (lambda w: bl.RTVBasis(np.eye(3), np.eye(5), 0), r"rank must be in \[1, 3\]"),
    (lambda w: identified_directions(w["basis"], w["data"].contexts), "data must be a PreferenceData"),
    (lambda w: identified_directions("basis", w["data"]), "coordinates must be a Coordinates object"),
    (lambda w: design(bl.VecCoordinates(2, 2), w["data"]), r"coordinates live on \(d_x, d_phi\) = \(2, 2\)"),
    (lambda w: identified_directions(w["basis"], w["data"], rtol=-1.0), r"rtol must be in \[0.0, 1.0\)"),
    (lambda w: information(w["basis"], w["data"], np.full(w["data"].n, np.nan)), "weights contains NaN"),
    (lambda w: information(w["basis"], w["data"], -np.ones(w["data"].n)),
     "weights must be 400 nonnegative"),
], ids=["rtv-nan", "rtv-1d", "rtv-rank0", "rtv-rank-big", "rtv-complex", "vec-zero", "vec-float", "rtv-left",
        "rtv-right", "rtv-rank", "identified-data", "identified-coordinates", "design-dims",
        "identified-rtol", "gram-nan-weights", "gram-negative-weights"])
def test_coordinates_refuse_bad_inputs(world, call, match):
    refused(lambda: call(world), match=match)


# --------------------------------------------------------------------------- ellipsoids, wald_set


def _ellipsoid(world, **changes):
    args = {"center": np.zeros(world["k"]), "precision": world["w"], "radius": 1.0,
            "coordinates": world["basis"], **changes}
    return lambda: bl.EllipsoidSet(**args)


def _asymmetric(world):
    w = world["w"].copy()
    w[0, 3] += 0.5
    return w


@pytest.mark.parametrize(("changes", "exc", "match"), [
    (lambda w: {"center": np.full(w["k"], np.nan)}, ValueError,
     r"center contains NaN or infinity, first at center\[0\]"),
    (lambda w: {"center": np.r_[np.zeros(w["k"] - 1), np.inf]}, ValueError,
     "center contains NaN or infinity"),
    (lambda w: {"center": np.zeros(w["k"] + 1)}, ValueError,
     r"center has 13 coordinates, but coordinates has 12"),
    (lambda w: {"center": np.zeros((w["k"], 1))}, ValueError, "center must be 1-dimensional"),
    (lambda w: {"center": np.full(w["k"], 1e200)}, ValueError, "center has an entry of magnitude"),
    (lambda w: {"precision": _asymmetric(w)}, ValueError, r"precision \(W\) must be symmetric: W\[0, 3\]"),
    (lambda w: {"precision": np.full((w["k"], w["k"]), np.nan)}, ValueError, r"precision \(W\) contains NaN"),
    (lambda w: {"precision": np.eye(3)}, ValueError,
     r"precision \(W\) must have shape \(12, 12\) to match center"),
    (lambda w: {"precision": None}, TypeError, r"precision \(W\) must be a \(12, 12\) array, got NoneType"),
    (lambda w: {"precision": w["w"].tolist()}, TypeError,
     r"precision \(W\) must be a \(12, 12\) array, got list"),
    (lambda w: {"precision": -np.eye(w["k"])}, ValueError, r"precision \(W\) must be positive semi-definite"),
    (lambda w: {"precision": np.eye(w["k"]) * 1e60}, ValueError,
     r"precision \(W\) has an entry of magnitude"),
    (lambda w: {"radius": -1.0}, ValueError, "radius must be finite and >= 0, got -1.0"),
    (lambda w: {"radius": float("nan")}, ValueError, "radius must be finite"),
    (lambda w: {"radius": float("inf")}, ValueError, "radius must be finite"),
    (lambda w: {"radius": "1"}, TypeError, "radius must be a real number"),
    (lambda w: {"kind": "box"}, ValueError, "kind must be one of 'gram', 'wald', 'credible', 'sandwich'"),
    (lambda w: {"level": 0.0}, ValueError, r"level must be in \(0, 1\) or None"),
    (lambda w: {"level": 1.5}, ValueError, r"level must be in \(0, 1\)"),
    (lambda w: {"level": float("nan")}, ValueError, "level must be finite"),
    (lambda w: {"sized_for": "everyone"}, ValueError, "sized_for must be one of 'personalised', 'global'"),
    (lambda w: {"sizing": 2.0}, TypeError, "sizing must be a ValueRadius or None, got float"),
    (lambda w: {"coordinates": "rtv"}, TypeError, "coordinates must be a Coordinates object"),
    (lambda w: {"coordinates": bl.VecCoordinates(2, 2)}, ValueError,
     "center has 12 coordinates, but coordinates has 4"),
    (lambda w: {"rcond": 0.5}, TypeError,
     "pivots, cholesky, cholesky_tail and rcond .* must be given together"),
], ids=["center-nan", "center-inf", "center-length", "center-2d", "center-huge", "w-asymmetric", "w-nan",
        "w-shape",
        "w-none", "w-list", "w-indefinite", "w-huge", "radius-negative", "radius-nan", "radius-inf",
        "radius-str",
        "kind", "level-0", "level-big", "level-nan", "sized-for", "sizing", "coordinates-str",
        "coordinates-dim",
        "factor-part"])
def test_ellipsoid_refuses_bad_fields(world, changes, exc, match):
    """Regression: a NaN centre, a non-symmetric W and a centre of the wrong length were accepted."""
    refused(_ellipsoid(world, **changes(world)), match=match, exc=exc)


def _factor(world, **changes):
    return {"pivots": np.arange(world["k"]), "cholesky": np.eye(world["k"]),
            "cholesky_tail": np.zeros((0, world["k"])), "rcond": 1.0, **changes}


@pytest.mark.parametrize(("changes", "exc", "match"), [
    (lambda w: {"pivots": np.arange(w["k"]) + 5}, ValueError,
     r"pivots must list distinct coordinates in \[0, 11\]"),
    (lambda w: {"pivots": np.zeros(w["k"], int)}, ValueError, "pivots must list distinct coordinates"),
    (lambda w: {"pivots": np.arange(w["k"], dtype=float)}, ValueError,
     "pivots must be a non-empty 1-d integer"),
    (lambda w: {"pivots": list(range(w["k"]))}, TypeError, "pivots must be an array, got list"),
    (lambda w: {"cholesky": np.eye(w["k"])[:, :3]}, ValueError,
     r"cholesky must be a square \(rank, rank\) array"),
    (lambda w: {"cholesky": -np.eye(w["k"])}, ValueError, "cholesky must have a positive diagonal"),
    (lambda w: {"cholesky": np.full((w["k"], w["k"]), np.nan)}, ValueError, "cholesky contains NaN"),
    (lambda w: {"cholesky_tail": np.zeros((2, w["k"]))}, ValueError,
     r"cholesky_tail must have shape \(0, 12\)"),
    (lambda w: {"cholesky_tail": None}, TypeError, "must be given together or not at all"),
    (lambda w: {"rcond": 0.0}, ValueError, r"rcond must be in \(0, 1\]"),
    (lambda w: {"rcond": float("nan")}, ValueError, r"rcond must be in \(0, 1\]"),
], ids=["perm-range", "perm-repeated", "perm-float", "perm-list", "lead-shape", "lead-diagonal", "lead-nan",
        "tail-shape", "tail-missing", "rcond-0", "rcond-nan"])
def test_factored_ellipsoid_refuses_a_bad_factor(world, changes, exc, match):
    """A factored set (precision None) is a constructor state too: its factor is checked where it is built."""
    refused(_ellipsoid(world, precision=None, **_factor(world, **changes(world))), match=match, exc=exc)


@pytest.mark.parametrize(("call", "exc", "match"), [
    (lambda w: bl.wald_set(np.full(w["k"], np.nan), w["w"], 0.9, w["basis"]), ValueError,
     "center contains NaN"),
    (lambda w: bl.wald_set(np.zeros(w["k"] - 2), w["w"], 0.9, w["basis"]), ValueError,
     "center has 10 coordinates"),
    (lambda w: bl.wald_set(np.zeros(w["k"]), _asymmetric(w), 0.9, w["basis"]), ValueError,
     r"precision \(W\) must be symmetric"),
    (lambda w: bl.wald_set(np.zeros(w["k"]), w["w"], 1.0, w["basis"]), ValueError,
     r"level must be in \(0, 1\)"),
    (lambda w: bl.wald_set(np.zeros(w["k"]), w["w"], -0.1, w["basis"]), ValueError, "level must be in"),
    (lambda w: bl.wald_set(np.zeros(w["k"]), w["w"], 0.9, None), TypeError,
     "coordinates must be a Coordinates"),
    (lambda w: bl.wald_set(np.zeros(w["k"]), np.full((w["k"], w["k"]), np.nan), 0.9, w["basis"],
                           overwrite=True),
     ValueError, r"precision \(W\) contains NaN"),
    (lambda w: w["prs"].calibrated_set(1.0), ValueError, "level must be in"),
    (lambda w: w["prs"].calibrated_set(0.9, "credible"), ValueError, "kind must be one of 'wald'"),
    (lambda w: w["prs"].penalty_set(-1.0), ValueError, "c2 must be in"),
    (lambda w: w["mle"].penalty_set("5"), TypeError, "c2 must be a real number"),
], ids=["center-nan", "center-length", "w-asymmetric", "level-1", "level-negative", "coordinates",
        "overwrite-nan",
        "calibrated-level", "calibrated-kind", "penalty-c2", "penalty-c2-str"])
def test_wald_and_fit_sets_refuse_bad_inputs(world, call, exc, match):
    refused(lambda: call(world), match=match, exc=exc)


@pytest.mark.parametrize("method", ["lower_bound", "dual_norm", "identified", "distance", "contains"])
@pytest.mark.parametrize(("z", "match"), [
    (lambda k: np.zeros(5),
     r"must have the set's 12 coordinates on its last axis, got shape \(5,\).*transform"),
    (lambda k: np.full(k, np.nan), "contains NaN or infinity"),
    (lambda k: np.zeros((3, k)) + 1j, "must be numeric and real"),
], ids=["length", "nan", "complex"])
def test_ellipsoid_methods_refuse_bad_vectors(world, method, z, match):
    refused(lambda: getattr(world["gram"], method)(z(world["k"])), match=match)


@pytest.mark.parametrize(("call", "match"), [
    (lambda s: s.with_radius(-1.0), "radius must be finite and >= 0"),
    (lambda s: s.with_radius(float("nan")), "radius must be finite"),
    (lambda s: s.with_radius(1.0, level=2.0), r"level must be in \(0, 1\)"),
    (lambda s: s.with_radius(1.0, sized_for="x"), "sized_for must be one of"),
    (lambda s: s.with_radius(1.0, kind="wald"), "with_radius changes only level, sized_for and sizing"),
], ids=["negative", "nan", "level", "sized-for", "kind"])
def test_with_radius_refuses_bad_changes(world, call, match):
    refused(lambda: call(world["wald"]), match=match)


# ---------------------------------------------------------------------- hulls and quantile sets


@pytest.mark.parametrize(("make", "match"), [
    (lambda w: bl.DrawsSet(np.full((5, w["k"]), np.nan), w["basis"]), "draws contains NaN"),
    (lambda w: bl.DrawsSet(np.zeros((0, w["k"])), w["basis"]), "draws must be a non-empty"),
    (lambda w: bl.DrawsSet(np.zeros(w["k"]), w["basis"]), "draws must be a non-empty"),
    (lambda w: bl.DrawsSet(np.zeros((5, 4)), w["basis"]), "draws has 4 coordinates, but coordinates has 12"),
    (lambda w: bl.DrawsSet(np.zeros((5, w["k"])) + 1j, w["basis"]), "draws must be numeric and real"),
    (lambda w: bl.DrawsSet(np.zeros((5, w["k"])), w["basis"], tail=-0.1), r"tail \(β\) must lie in \[0, 1\]"),
    (lambda w: bl.DrawsSet(np.zeros((5, w["k"])), w["basis"], tail=1.5), r"tail \(β\) must lie in"),
    (lambda w: bl.DrawsSet(np.zeros((5, w["k"])), w["basis"], tail=float("nan")), "tail must be finite"),
    (lambda w: bl.DrawsSet(np.zeros((5, w["k"])), w["basis"], kind="hull"),
     "kind must be one of 'draws', 'cvar'"),
    (lambda w: bl.DrawsSet(np.zeros((5, w["k"])), w["basis"], level=1.0), r"level must be in \(0, 1\)"),
    (lambda w: bl.DrawsSet(np.zeros((5, w["k"])), "basis"), "coordinates must be a Coordinates object"),
    (lambda w: w["draws_set"].lower_bound(np.zeros(4)), "z must have the set's 12 coordinates"),
    (lambda w: w["draws_set"].contains(np.zeros(3)), "theta must have the set's 12 coordinates"),
    (lambda w: w["draws_set"].contains(np.zeros((2, w["k"]))), "theta must be one point of 12 coordinates"),
    (lambda w: bl.QuantileSet(np.zeros((1, w["k"])), w["basis"]),
     r"draws must be a \(J, k\) array with J >= 2"),
    (lambda w: bl.QuantileSet(np.zeros((5, w["k"])), w["basis"], level=0.0), r"level must be in \(0, 1\)"),
    (lambda w: bl.QuantileSet(np.zeros((5, w["k"])), w["basis"], level=1.0), r"level must be in \(0, 1\)"),
    (lambda w: bl.QuantileSet(np.zeros((5, w["k"])), w["basis"], level=None), "level must be a real number"),
    (lambda w: bl.QuantileSet(np.full((5, w["k"]), np.inf), w["basis"]), "draws contains NaN or infinity"),
    (lambda w: bl.QuantileSet(np.zeros((5, 3)), w["basis"]),
     "draws has 3 coordinates, but coordinates has 12"),
    (lambda w: bl.QuantileSet(np.zeros((5, w["k"])), w["basis"], kind="draws"),
     "kind must be one of 'quantile'"),
    (lambda w: w["quantile_set"].lower_bound(np.zeros((2, 4))), "z must have the set's 12 coordinates"),
], ids=["draws-nan", "draws-empty", "draws-1d", "draws-dim", "draws-complex", "tail-negative", "tail-big",
        "tail-nan", "draws-kind", "draws-level", "draws-coordinates", "draws-lower-bound", "draws-contains",
        "draws-contains-2d", "quantile-one", "quantile-level-0", "quantile-level-1", "quantile-level-none",
        "quantile-inf", "quantile-dim", "quantile-kind", "quantile-lower-bound"])
def test_draws_and_quantile_sets_refuse_bad_inputs(world, make, match):
    refused(lambda: make(world), match=match)


# ------------------------------------------------------------------------------------ policies


@pytest.mark.parametrize(("theta", "exc", "match"), [
    (lambda w: np.full((3, 5), np.nan), ValueError,
     r"theta contains NaN or infinity, first at theta\[\(0, 0\)\]"),
    (lambda w: np.r_[np.zeros((2, 5)), [[0, 0, np.inf, 0, 0]]], ValueError,
     r"theta contains NaN or infinity"),
    (lambda w: np.zeros((5, 3)), ValueError, r"theta has shape \(5, 3\), the population needs \(3, 5\)"),
    (lambda w: np.zeros(15), ValueError, "theta must be 2-dimensional"),
    (lambda w: w["prs"], TypeError,
     r"theta must be an estimate .*got a PRSResult.*fit\.theta.*pessimistic_policy"),
    (lambda w: w["mle"], TypeError, r"got a MLEResult \(a fit\)"),
    (lambda w: "theta", TypeError, r"theta must be numeric, got strings"),
    (lambda w: np.full((3, 5), 1e300), ValueError, "theta has an entry of magnitude"),
], ids=["nan", "inf", "transposed", "flat", "prs-fit", "mle-fit", "string", "huge"])
def test_greedy_policy_refuses_bad_theta(world, theta, exc, match):
    """Regression: a NaN Θ played action 0 with objective_value=nan; a fit ended in float() of a PRSResult."""
    refused(lambda: bl.greedy_policy(theta(world), world["pop"]), match=match, exc=exc)


@pytest.mark.parametrize(("call", "exc", "match"), [
    (lambda w: bl.greedy_policy(w["mle"].theta, w["pop"].contexts), TypeError,
     "population must be a Population"),
    (lambda w: bl.greedy_policy(w["mle"].theta, w["pop"], scope="both"), ValueError,
     "scope must be one of 'personalised', 'global'"),
    (lambda w: bl.pessimistic_policy(w["gram"].center, w["pop"]), TypeError,
     "uncertainty_set must have `coordinates` and `lower_bound"),
    (lambda w: bl.pessimistic_policy(w["gram"], w["pop"], objective="minimax"), ValueError,
     "objective must be one of 'relaxed', 'exact'"),
    (lambda w: bl.pessimistic_policy(w["gram"], w["pop"], scope="nonsense"), ValueError,
     "scope must be one of"),
    (lambda w: bl.pessimistic_policy(w["gram"], w["pop"], reference_action=99), ValueError,
     r"reference_action must be in \[0, 3\], got 99"),
    (lambda w: bl.pessimistic_policy(w["gram"], w["pop"], reference_action=-1), ValueError,
     "reference_action"),
    (lambda w: bl.pessimistic_policy(w["gram"], w["pop"], reference_action=1.0), TypeError,
     "reference_action must be an integer"),
    (lambda w: bl.pessimistic_policy(w["gram"], w["pop"], welfare="rawls"), ValueError,
     "welfare must be one of 'utilitarian', 'nash'"),
    (lambda w: bl.pessimistic_policy(w["gram"], w["pop"], welfare="nash", floor=0.0), ValueError,
     "floor must be in"),
    (lambda w: bl.pessimistic_policy(w["gram"], w["pop"], tol=0.0), ValueError, "tol must be in"),
    (lambda w: bl.pessimistic_policy(w["gram"], w["pop"], max_iter=0), ValueError, "max_iter must be >= 1"),
    (lambda w: bl.pessimistic_policy(w["quantile_set"], w["pop"], objective="exact"), TypeError,
     "objective='exact' needs a convex set"),
    (lambda w: bl.pessimistic_policy(w["gram"], w["pop"], objective="exact", welfare="nash"), TypeError,
     "needs a set with an exact Nash program"),
    (lambda w: bl.pessimistic_policy(bl.EllipsoidSet(np.zeros(4), np.eye(4), 1.0, bl.VecCoordinates(2, 2)),
                                     w["pop"]),
     ValueError, r"population has \(d_x, d_phi\) = \(3, 5\), but the set's coordinates live on \(2, 2\)"),
], ids=["greedy-population", "greedy-scope", "set-array", "objective", "scope", "reference-99",
        "reference-negative",
        "reference-float", "welfare", "floor", "tol", "max-iter", "quantile-exact", "nash-ellipsoid",
        "set-dims"])
def test_policy_solvers_refuse_bad_options(world, call, exc, match):
    refused(lambda: call(world), match=match, exc=exc)


def _probabilities(world, value):
    probs = np.eye(world["pop"].n_actions)[np.zeros(world["pop"].n, int)]
    probs[0, 0] = value
    return probs


@pytest.mark.parametrize(("probabilities", "kwargs", "exc", "match"), [
    (lambda w: -_probabilities(w, 1.0), {}, ValueError, r"probabilities\[0, 0\] = -1 is negative"),
    (lambda w: _probabilities(w, np.nan), {}, ValueError, r"probabilities contains NaN or infinity"),
    (lambda w: _probabilities(w, -np.inf), {}, ValueError, r"probabilities contains NaN or infinity"),
    (lambda w: _probabilities(w, 0.5), {}, ValueError, r"probabilities: row 0 sums to 0.5, not 1"),
    (lambda w: 2 * _probabilities(w, 1.0), {}, ValueError, "row 0 sums to 2"),
    (lambda w: _probabilities(w, 1.0)[:-1], {}, ValueError, r"probabilities must have shape \(12, 4\)"),
    (lambda w: _probabilities(w, 1.0)[:, :2], {}, ValueError, r"probabilities must have shape \(12, 4\)"),
    (lambda w: np.ones(4) / 4, {}, ValueError, "probabilities must be 2-dimensional"),
    (lambda w: _probabilities(w, 1.0).astype(str), {}, TypeError,
     "probabilities must be numeric, got strings"),
    (lambda w: _probabilities(w, 1.0), {"reference_action": 99}, ValueError, "reference_action must be in"),
    (lambda w: _probabilities(w, 1.0), {"scope": "x"}, ValueError, "scope must be one of"),
], ids=["minus-one", "nan", "minus-inf", "half-row", "double-row", "rows", "actions", "1d", "strings",
        "reference",
        "scope"])
def test_pessimistic_value_refuses_probabilities_off_the_simplex(world, probabilities, kwargs, exc, match):
    """Regression: probabilities of −1 gave 0.355 and NaN gave −inf."""
    refused(lambda: bl.pessimistic_value(world["gram"], world["pop"], probabilities(world), **kwargs),
            match=match, exc=exc)


def test_pessimistic_value_refuses_a_non_set(world):
    refused(lambda: bl.pessimistic_value("set", world["pop"], _probabilities(world, 1.0)),
            match="uncertainty_set must have `coordinates`", exc=TypeError)


@pytest.mark.parametrize(("changes", "exc", "match"), [
    (lambda p: {"probabilities": -p.probabilities}, ValueError, r"probabilities\[0, \d\] = -1 is negative"),
    (lambda p: {"probabilities": np.full_like(p.probabilities, np.nan)}, ValueError,
     "probabilities contains NaN"),
    (lambda p: {"probabilities": p.probabilities * 0.5}, ValueError, "row 0 sums to 0.5, not 1"),
    (lambda p: {"probabilities": p.probabilities[0]}, ValueError, "probabilities must be 2-dimensional"),
    (lambda p: {"unit_of_row": np.full_like(p.unit_of_row, 10**6)}, ValueError,
     r"unit_of_row must index the 12 rows of probabilities \(0 .. 11\), got 1000000"),
    (lambda p: {"unit_of_row": -1 - p.unit_of_row}, ValueError, "unit_of_row must index"),
    (lambda p: {"unit_of_row": p.unit_of_row.astype(float)}, ValueError,
     "unit_of_row must be a non-empty 1-d integer"),
    (lambda p: {"unit_of_row": p.unit_of_row[:, None]}, ValueError,
     "unit_of_row must be a non-empty 1-d integer"),
    (lambda p: {"scope": "nonsense"}, ValueError,
     "scope must be one of 'personalised', 'global'; got 'nonsense'"),
    (lambda p: {"objective": "best"}, ValueError, "objective must be one of 'greedy', 'relaxed', 'exact'"),
    (lambda p: {"welfare": "rawls"}, ValueError, "welfare must be one of"),
    (lambda p: {"reference_action": 99}, ValueError, r"reference_action must be in \[0, 3\], got 99"),
    (lambda p: {"reference_action": -1}, ValueError, "reference_action must be in"),
    (lambda p: {"reference_action": 1.0}, TypeError, "reference_action must be an integer"),
    (lambda p: {"pessimistic_value": np.nan}, ValueError,
     "pessimistic_value is NaN; only a greedy policy may"),
    (lambda p: {"objective_value": np.nan}, ValueError, "objective_value is NaN"),
    (lambda p: {"objective_value": "high"}, TypeError, "objective_value must be a real number"),
    (lambda p: {"rounded_value": np.nan}, ValueError, "rounded_value is NaN"),
    (lambda p: {"theta": np.full(12, np.nan)}, ValueError, "theta contains NaN"),
    (lambda p: {"certificate": (0.0, 1.0)}, TypeError,
     "certificate must be a Certificate or None, got tuple"),
    (lambda p: {"status": "solved"}, TypeError, "status must be a PolicyStatus"),
    (lambda p: {"population": 17}, TypeError,
     r"population must be a population's fingerprint \(str\) or None"),
], ids=["negative", "nan", "half", "1d", "unit-1e6", "unit-negative", "unit-float", "unit-2d", "scope",
        "objective",
        "welfare", "reference-99", "reference-negative", "reference-float", "pessimistic-nan",
        "objective-nan",
        "objective-str", "rounded-nan", "theta-nan", "certificate", "status", "population"])
def test_policy_refuses_bad_fields(world, changes, exc, match):
    """Regression: Policy had no validation (a tampered file or a hand-built policy was taken as it was)."""
    policy = world["policy"]
    refused(_replace(policy, **changes(policy)), match=match, exc=exc)


@pytest.mark.parametrize(("lower", "upper", "match"), [
    (np.nan, 1.0, "certificate lower bound must be a real number"),
    (0.0, "1", "certificate upper bound must be a real number"),
    (2.0, 1.0, "certificate lower bound 2 exceeds its upper bound 1"),
], ids=["nan", "string", "crossed"])
def test_certificate_refuses_bad_bounds(lower, upper, match):
    refused(lambda: bl.Certificate(lower, upper), match=match)


def test_greedy_policy_keeps_nan_pessimistic_value(world):
    """A greedy policy has no set: its NaN pessimistic value is the one NaN a Policy accepts."""
    policy = bl.greedy_policy(world["mle"].theta, world["pop"])
    assert np.isnan(policy.pessimistic_value) and np.isfinite(policy.objective_value)
    assert policy.population == world["pop"].fingerprint


# ---------------------------------------------------------------------------------- evaluation


@pytest.mark.parametrize("evaluate", ["suboptimality", "policy_value", "relative_value"])
def test_evaluation_refuses_a_policy_of_another_population_of_the_same_size(world, evaluate):
    """Regression: a global policy solved on another population of the same size gave 0.476 without a word."""
    other = world["other_global"]
    assert other.n == world["pop_global"].n
    refused(lambda: getattr(bl, evaluate)(world["global_policy"], world["problem"], other),
            match="population is not the one the policy was solved on.*evaluate the policy on its own")


@pytest.mark.parametrize(("call", "exc", "match"), [
    (lambda w: bl.suboptimality(w["policy"], w["problem"], w["pop_global"]), ValueError,
     "population has 20 rows, but the policy was solved on 12"),
    (lambda w: bl.policy_value(w["policy"].probabilities, w["problem"], w["pop"]), TypeError,
     "policy must be a Policy .*got ndarray"),
    (lambda w: bl.policy_value(w["policy"], w["problem"], w["pop"].contexts), TypeError,
     "population must be a Population"),
    (lambda w: bl.policy_value(w["policy"], np.zeros((5, 3)), w["pop"]), ValueError,
     r"truth: Θ\* must have shape \(d_x, d_phi\) = \(3, 5\)"),
    (lambda w: bl.policy_value(w["policy"], np.full((3, 5), np.nan), w["pop"]), ValueError,
     "truth contains NaN"),
    (lambda w: bl.policy_value(w["policy"], "theta", w["pop"]), TypeError, "truth must be numeric"),
    (lambda w: bl.optimal_value(w["problem"], w["pop"], "both"), ValueError, "scope must be one of"),
    (lambda w: bl.optimal_value(w["problem"], w["pop"].features), TypeError,
     "population must be a Population"),
    (lambda w: bl.optimal_value(np.full((3, 5), np.inf), w["pop"]), ValueError,
     "truth contains NaN or infinity"),
    (lambda w: bl.relative_value(w["policy"], w["problem"].theta.T, w["pop"]), ValueError,
     "truth: Θ\\* must have"),
    (lambda w: bl.suboptimality(w["policy"], w["problem"], bl.Population(
        w["pop"].contexts, w["pop"].features[:, :3], w["pop"].states)), ValueError,
     "population has 3 actions, but the policy chooses among 4"),
], ids=["rows", "not-policy", "not-population", "truth-shape", "truth-nan", "truth-str", "optimal-scope",
        "optimal-population", "optimal-inf", "relative-transposed", "actions"])
def test_evaluation_refuses_bad_inputs(world, call, exc, match):
    refused(lambda: call(world), match=match, exc=exc)


def test_evaluation_of_the_policys_own_population_is_right(world):
    """The fingerprint does not get in the way: the policy's own population and an equal copy evaluate."""
    pop, policy = world["pop_global"], world["global_policy"]
    copy = bl.Population(pop.contexts.copy(), np.asfortranarray(pop.features), pop.states.copy())
    gap = bl.suboptimality(policy, world["problem"], pop)
    assert gap >= -1e-12 and gap == bl.suboptimality(policy, world["problem"], copy)


def test_a_large_populations_fingerprint_samples_rows_whatever_the_layout(world, monkeypatch):
    """Above ``config["fingerprint_bytes"]`` a sample of rows is hashed: the same for any memory layout, and
    still another population's (drawn apart, it differs in every row) is told apart."""

    bl.set_config(fingerprint_bytes=256)
    pop, other = world["pop_global"], world["other_global"]
    fortran = bl.Population(np.asfortranarray(pop.contexts), np.asfortranarray(pop.features), pop.states)
    assert fortran.fingerprint == bl.Population(pop.contexts, pop.features, pop.states).fingerprint
    assert bl.Population(other.contexts, other.features, other.states).fingerprint != fortran.fingerprint


# ---------------------------------------------------------------------------- hypothesis cases


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(row=st.integers(0, N - 1), col=st.integers(0, 2), bad=st.sampled_from([np.nan, np.inf, -np.inf]),
       argument=st.sampled_from(["contexts", "differences"]))
def test_any_non_finite_entry_is_refused_where_it_is(world, row, col, bad, argument):
    arrays = {"contexts": world["x"].copy(), "differences": world["d"].copy()}
    arrays[argument][row, col] = bad
    refused(lambda: bl.PreferenceData(arrays["contexts"], arrays["differences"], world["y"]),
            match=rf"{argument} contains NaN or infinity, first at {argument}\[\({row}, {col}\)\]")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scale=st.floats(1e51, 1e307), row=st.integers(0, N - 1),
       argument=st.sampled_from(["contexts", "differences"]))
def test_any_huge_finite_entry_is_refused_with_advice_to_rescale(world, scale, row, argument):
    arrays = {"contexts": world["x"].copy(), "differences": world["d"].copy()}
    arrays[argument][row, 0] = scale
    refused(lambda: bl.PreferenceData(arrays["contexts"], arrays["differences"], world["y"]),
            match=rf"{argument} has an entry of magnitude .* at {argument}\[\({row}, 0\)\].*Rescale")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.lists(st.floats(-2, 2), min_size=4, max_size=4), min_size=12, max_size=12))
def test_probabilities_off_the_simplex_are_refused_and_on_it_accepted(world, rows):
    probs = np.array(rows)
    on_simplex = bool(np.all(probs >= -1e-6) and np.all(np.abs(probs.sum(axis=1) - 1) <= 1e-6))
    call = lambda: bl.pessimistic_value(world["gram"], world["pop"], probs)  # noqa: E731
    if on_simplex:
        assert np.isfinite(call())
    else:
        refused(call, match=r"probabilities(\[\d+, \d\] = .* is negative|: row \d+ sums to)")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(labels=st.lists(st.sampled_from(["0", "1", "yes", "no", "true"]), min_size=N, max_size=N))
def test_string_labels_are_refused_with_the_conversion(world, labels):
    refused(lambda: bl.PreferenceData(world["x"], world["d"], np.array(labels)),
            match=r"labels must be 0/1 numbers, got strings.*convert them first")


# ---------------------------------------------------------------------- the factored set's file


def _factored_round_trip(tmp_path, k, d_x):
    """A factored Wald set of k coordinates saved, loaded and solved: the same policy, bit for bit."""
    rng = np.random.default_rng(5)
    d_phi = k // d_x
    b = rng.normal(size=(k, 8))
    information = np.diag(rng.uniform(1.0, 2.0, k)) + b @ b.T / 8
    coordinates = bl.VecCoordinates(d_x, d_phi)
    wald = bl.wald_set(rng.normal(size=k), information, 0.9, coordinates, overwrite=True)
    assert wald.precision is None and wald.cholesky is not None and wald.pivots.size == k
    population = bl.Population(rng.uniform(-1, 1, (6, d_x)), rng.normal(size=(6, 3, d_phi)), np.arange(6))
    before = bl.pessimistic_policy(wald, population)
    path = bl.save(wald, tmp_path / "wald.nc")
    loaded = bl.load(path)
    assert loaded.precision is None and loaded.radius == wald.radius and loaded.kind == "wald"
    after = bl.pessimistic_policy(loaded, population)
    np.testing.assert_array_equal(after.probabilities, before.probabilities)
    assert after.pessimistic_value == before.pessimistic_value
    z = rng.normal(size=(4, k))
    np.testing.assert_array_equal(loaded.lower_bound(z), wald.lower_bound(z))
    return before, after


def test_a_factored_wald_set_saves_and_loads(tmp_path, monkeypatch):
    """Regression: a set built by EllipsoidSet.factored (PRS from config["factored_min"] coordinates on) saved
    but did not load; its factor is now fields the constructor validates (``config["factored_min"]`` lowered
    for a fast test)."""
    bl.set_config(factored_min=64)
    _factored_round_trip(tmp_path, 96, 8)


def test_a_factored_set_with_a_singular_w_saves_and_loads(tmp_path, monkeypatch):
    bl.set_config(factored_min=8)
    rng = np.random.default_rng(6)
    a = rng.normal(size=(6, 12))
    wald = bl.wald_set(np.zeros(12), a.T @ a, 0.9, bl.VecCoordinates(3, 4), overwrite=True)
    assert wald.cholesky_tail.shape[0] > 0
    loaded = bl.load(bl.save(wald, tmp_path / "singular.nc"))
    z = rng.normal(size=(5, 12)) @ (a.T @ a)
    np.testing.assert_array_equal(loaded.lower_bound(z), wald.lower_bound(z))
    assert loaded.effective_dim == wald.effective_dim == 6


@pytest.mark.slow
def test_a_factored_wald_set_at_the_real_factored_min_saves_and_loads(tmp_path):
    """At FACTORED_MIN = 8,192 coordinates itself (W 512 MiB): slow, excluded by default."""
    _factored_round_trip(tmp_path, bl.get_config()["factored_min"], 64)


# ------------------------------------------------------------------- subsets and value-sized sets


@pytest.mark.parametrize(("index", "match"), [
    ("a", "index does not select rows of these 400 comparisons"),
    (400, "index does not select rows of these 400 comparisons: index 400 is out of bounds"),
    (np.array([1.5]), "index does not select rows"),
    (slice(5, 5), "index selects no rows of these 400 comparisons"),
    (np.zeros(3, bool), "index does not select rows"),
], ids=["string", "out-of-range", "float", "empty", "short-mask"])
def test_subset_refuses_bad_indices(world, index, match):
    refused(lambda: world["data"].subset(index), match=match)


@pytest.mark.parametrize(("call", "exc", "match"), [
    (lambda w: bl.sets.size_for_values(w["wald"], w["pop_global"].contexts), TypeError,
     "population must be a Population, got ndarray"),
    (lambda w: bl.sets.size_for_values(w["wald"], w["pop_global"], scope="x"), ValueError,
     "scope must be one of"),
    (lambda w: bl.sets.size_for_values(w["wald"], w["pop_global"], reference_action=9), ValueError,
     r"reference_action must be in \[0, 3\], got 9"),
    (lambda w: bl.sets.size_for_values(w["gram"], w["pop_global"]), ValueError,
     "level: the 'gram' set has no level"),
    (lambda w: bl.sets.size_for_values(w["draws_set"], w["pop_global"]), TypeError,
     "ellipsoid must be an EllipsoidSet, got DrawsSet"),
    (lambda w: bl.sets.size_for_values(w["wald"], w["pop_global"], level=1.0), ValueError,
     "level must be in"),
    (lambda w: bl.sets.size_for_values(w["wald"], w["pop_global"], draws=3), ValueError,
     "draws must be >= 10"),
    (lambda w: bl.sets.size_for_values(w["wald"], w["pop_global"], seed="s"), TypeError,
     "seed must be a non-negative int"),
    (lambda w: bl.sets.value_radius(w["wald"], np.zeros((3, 5)), 0.9), ValueError,
     r"directions must have shape \(J, 12\)"),
], ids=["population", "scope", "reference", "no-level", "not-ellipsoid", "level", "draws", "seed",
        "directions"])
def test_value_sizing_refuses_bad_inputs(world, call, exc, match):
    refused(lambda: call(world), match=match, exc=exc)


@pytest.mark.parametrize(("call", "exc", "match"), [
    (lambda w: w["data"].split(0), ValueError, r"n_initial must be in \[1, 399\], got 0"),
    (lambda w: w["data"].split(400), ValueError, r"n_initial must be in \[1, 399\], got 400"),
    (lambda w: w["data"].split("half"), TypeError, "n_initial must be an integer"),
    (lambda w: w["pop"].units("everyone"), ValueError, "scope must be one of 'personalised', 'global'"),
    (lambda w: w["problem"].rewards(w["pop"].features), TypeError,
     "population must be a Population, got ndarray"),
    (lambda w: w["problem"].rewards(bl.Population(w["px"], w["pf"], w["ps"])), ValueError,
     r"population has \(d_x, d_phi\) = \(3, 4\), the problem \(3, 5\)"),
    (lambda w: w["prs"].summary(level=1.5), ValueError, r"level must be in \(0, 1\)"),
    (lambda w: w["mle"].summary(level="high"), TypeError, "level must be a real number"),
], ids=["split-0", "split-n", "split-str", "units-scope", "rewards-array", "rewards-dims", "summary-level",
        "summary-level-str"])
def test_data_population_problem_and_summary_methods_refuse_bad_arguments(world, call, exc, match):
    refused(lambda: call(world), match=match, exc=exc)
