"""PreferenceData and Population: validation at the boundary, splits, immutability."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from conftest import repeated_rows
from hypothesis import given, settings
from hypothesis import strategies as st

from bayes_loco import Population, PreferenceData


def _arrays(n=20, d_x=3, d_phi=4, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, d_x)), rng.standard_normal((n, d_phi)),
            rng.integers(0, 2, size=n))


# ----------------------------------------------------------------------------- construction


def test_valid_construction_copies_and_converts():
    x, d, y = _arrays()
    data = PreferenceData(x, d, y)
    assert (data.n, data.d_x, data.d_phi, len(data)) == (20, 3, 4, 20)
    np.testing.assert_array_equal(data.contexts, x)
    np.testing.assert_array_equal(data.differences, d)
    np.testing.assert_array_equal(data.labels, y)
    assert data.contexts.dtype == np.float64 and data.differences.dtype == np.float64
    assert data.labels.dtype == np.int8
    assert data.actions is None
    assert "N=20" in repr(data) and "d_x=3" in repr(data) and "d_phi=4" in repr(data)


def test_integer_and_list_inputs_are_converted_to_float():
    data = PreferenceData([[1, 2], [3, 4]], [[1], [0]], [True, False])
    assert data.contexts.dtype == np.float64
    np.testing.assert_array_equal(data.labels, [1, 0])


@pytest.mark.parametrize("name", ["contexts", "differences"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_values_are_rejected_naming_argument_and_index(name, bad):
    x, d, y = _arrays()
    arrays = {"contexts": x.copy(), "differences": d.copy()}
    arrays[name][5, 2] = bad
    with pytest.raises(ValueError, match=rf"{name}.*NaN or infinity.*{name}\[\(?5, 2\)?\]"):
        PreferenceData(arrays["contexts"], arrays["differences"], y)


@pytest.mark.parametrize("name", ["contexts", "differences"])
def test_wrong_ndim_is_rejected(name):
    x, d, y = _arrays()
    arrays = {"contexts": x, "differences": d}
    arrays[name] = arrays[name][:, 0]
    with pytest.raises(ValueError, match=rf"{name} must be 2-dimensional.*\(20,\)"):
        PreferenceData(arrays["contexts"], arrays["differences"], y)


def test_labels_must_be_one_dimensional():
    x, d, y = _arrays()
    with pytest.raises(ValueError, match="labels must be 1-dimensional"):
        PreferenceData(x, d, y[:, None])


def test_non_numeric_contexts_raise_type_error_naming_them():
    _, d, y = _arrays(n=2)
    with pytest.raises(TypeError, match="contexts must be numeric"):
        PreferenceData([["a", "b", "c"], ["d", "e", "f"]], d, y)


def test_mismatched_rows_name_both_arrays():
    x, d, y = _arrays()
    with pytest.raises(ValueError, match=r"contexts has 20 rows, differences has 19"):
        PreferenceData(x, d[:19], y)
    with pytest.raises(ValueError, match=r"contexts has 20 rows, labels has 21"):
        PreferenceData(x, d, np.r_[y, 1])


@pytest.mark.parametrize("bad", [2, -1, 0.25])
def test_labels_outside_zero_half_one_are_rejected_with_index(bad):
    x, d, y = _arrays()
    y = y.astype(float)
    y[17] = bad
    with pytest.raises(ValueError, match=r"labels\[17\] = .*expected 0, 0.5 \(a tie\) or 1"):
        PreferenceData(x, d, y)


def test_bad_label_message_shows_the_plain_value():
    x, d, y = _arrays()
    y = y.copy()
    y[17] = 2
    with pytest.raises(ValueError, match=re.escape("labels[17] = 2, expected 0, 0.5 (a tie) or 1")):
        PreferenceData(x, d, y)


@given(n=st.integers(1, 30), data=st.data())
@settings(max_examples=40, deadline=None, derandomize=True)
def test_first_bad_label_is_reported(n, data):
    """Whatever the labels, the error names the first index holding a value outside {0, 1}."""
    values = data.draw(st.lists(st.sampled_from([0, 1, 2, 3, -1]), min_size=n, max_size=n))
    y = np.array(values)
    x, d, _ = _arrays(n=n)
    bad = np.flatnonzero(~np.isin(y, (0, 1)))
    if bad.size == 0:
        np.testing.assert_array_equal(PreferenceData(x, d, y).labels, y)
    else:
        with pytest.raises(ValueError, match=rf"labels\[{bad[0]}\] = "):
            PreferenceData(x, d, y)


def test_empty_arrays_are_rejected():
    with pytest.raises(ValueError, match="contexts is empty"):
        PreferenceData(np.zeros((0, 3)), np.zeros((0, 4)), np.zeros(0))
    with pytest.raises(ValueError, match="differences is empty"):
        PreferenceData(np.zeros((2, 3)), np.zeros((2, 0)), np.zeros(2))


def test_actions_validation_and_storage():
    x, d, y = _arrays()
    actions = np.stack([np.zeros(20, int), np.arange(20)], axis=1)
    data = PreferenceData(x, d, y, actions)
    np.testing.assert_array_equal(data.actions, actions)
    with pytest.raises(ValueError, match=r"actions must be an integer array of shape \(20, 2\)"):
        PreferenceData(x, d, y, actions[:, :1])
    with pytest.raises(ValueError, match="actions must be an integer array"):
        PreferenceData(x, d, y, actions.astype(float))


# ----------------------------------------------------------------------------- immutability


def test_copy_false_freezes_owned_float_arrays_in_place_and_copies_the_rest():
    x, d, y = _arrays()
    data = PreferenceData.from_arrays(x, y, differences=d, copy=False)
    assert data.contexts is x and data.differences is d  # no second N × d_φ array
    assert not x.flags.writeable and not d.flags.writeable
    # a view, or an array that needs converting, is still copied: the caller's memory stays writeable
    x, d, y = _arrays()
    base = np.vstack([d, d])
    data = PreferenceData.from_arrays(x.astype(np.float32), y, differences=base[: len(d)], copy=False)
    assert not np.shares_memory(data.differences, base) and base.flags.writeable
    assert data.contexts.dtype == np.float64
    # the default copies, and copy is validated
    x, d, y = _arrays()
    assert not np.shares_memory(PreferenceData.from_arrays(x, y, differences=d).differences, d)
    with pytest.raises(TypeError, match="copy must be a bool"):
        PreferenceData.from_arrays(x, y, differences=d, copy="no")


def test_arrays_are_read_only_and_callers_arrays_are_not_frozen():
    x, d, y = _arrays()
    actions = np.zeros((20, 2), dtype=np.int64)
    data = PreferenceData(x, d, y, actions)
    for arr in (data.contexts, data.differences, data.labels, data.actions):
        assert not arr.flags.writeable
        with pytest.raises(ValueError):
            arr[0] = 1
    for arr in (x, d, y, actions):
        assert arr.flags.writeable
    # the instance holds copies: changing the caller's arrays does not change the data
    before = data.contexts.copy()
    x[0, 0] += 100.0
    actions[0, 1] = 5
    np.testing.assert_array_equal(data.contexts, before)
    assert data.actions[0, 1] == 0


def test_dataclass_is_frozen():
    data = PreferenceData(*_arrays())
    with pytest.raises(AttributeError):
        data.contexts = np.zeros((20, 3))


# ----------------------------------------------------------------------------- from_arrays


def test_from_arrays_with_features_equals_differences():
    rng = np.random.default_rng(1)
    x, _, y = _arrays()
    f1, f0 = rng.standard_normal((20, 4)), rng.standard_normal((20, 4))
    a = PreferenceData.from_arrays(x, y, features_1=f1, features_0=f0)
    b = PreferenceData.from_arrays(x, y, differences=f1 - f0)
    np.testing.assert_array_equal(a.differences, f1 - f0)
    np.testing.assert_array_equal(a.differences, b.differences)
    np.testing.assert_array_equal(a.labels, b.labels)


def test_from_arrays_rejects_both_or_neither():
    x, d, y = _arrays()
    with pytest.raises(ValueError, match="not both"):
        PreferenceData.from_arrays(x, y, features_1=d, features_0=d, differences=d)
    with pytest.raises(ValueError, match="not both"):
        PreferenceData.from_arrays(x, y, features_1=d, differences=d)
    with pytest.raises(ValueError, match="features_1 and features_0 are both required"):
        PreferenceData.from_arrays(x, y, features_1=d)
    with pytest.raises(ValueError, match="features_1 and features_0 are both required"):
        PreferenceData.from_arrays(x, y)


def test_from_arrays_feature_shape_mismatch_names_both():
    x, d, y = _arrays()
    with pytest.raises(ValueError, match=r"features_1 has shape \(20, 4\), features_0 has shape \(20, 3\)"):
        PreferenceData.from_arrays(x, y, features_1=d, features_0=d[:, :3])
    bad = d.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match=r"features_0.*features_0\[\(?3, 1\)?\]"):
        PreferenceData.from_arrays(x, y, features_1=d, features_0=bad)


def test_from_arrays_row_mismatch_names_the_feature_argument():
    x, d, y = _arrays()
    with pytest.raises(ValueError, match=r"contexts has 20 rows, features_1 has 19"):
        PreferenceData.from_arrays(x, y, features_1=d[:19], features_0=d[:19])


# ----------------------------------------------------------------------------- frames


def test_frame_round_trip():
    data = PreferenceData(*_arrays())
    frame = data.to_frame()
    assert list(frame.columns) == ["x0", "x1", "x2", "dphi0", "dphi1", "dphi2", "dphi3", "y"]
    back = PreferenceData.from_frame(frame, context_columns=["x0", "x1", "x2"],
                                     difference_columns=[f"dphi{j}" for j in range(4)])
    np.testing.assert_array_equal(back.contexts, data.contexts)
    np.testing.assert_array_equal(back.differences, data.differences)
    np.testing.assert_array_equal(back.labels, data.labels)


def test_from_frame_respects_column_order_and_label_column():
    frame = pd.DataFrame({"b": [1.0, 2.0], "a": [3.0, 4.0], "d": [5.0, 6.0], "pref": [1, 0]})
    data = PreferenceData.from_frame(frame, context_columns=["a", "b"], difference_columns=["d"],
                                     label_column="pref")
    np.testing.assert_array_equal(data.contexts, [[3.0, 1.0], [4.0, 2.0]])
    np.testing.assert_array_equal(data.labels, [1, 0])


def test_from_frame_missing_columns_are_listed():
    frame = PreferenceData(*_arrays()).to_frame()
    with pytest.raises(ValueError, match=r"missing columns \['x9', 'z'\]"):
        PreferenceData.from_frame(frame, context_columns=["x0", "x9"], difference_columns=["dphi0"],
                                  label_column="z")


def test_from_frame_requires_a_dataframe():
    with pytest.raises(TypeError, match="frame must be a pandas DataFrame"):
        PreferenceData.from_frame({"x0": [1.0]}, context_columns=["x0"], difference_columns=["x0"])


# ----------------------------------------------------------------------------- split and subset


@pytest.mark.parametrize("n0", [1, 5, 19])
def test_split_first_n0_and_rest(n0):
    x, d, y = _arrays()
    actions = np.stack([np.zeros(20, int), np.arange(20)], axis=1)
    data = PreferenceData(x, d, y, actions)
    first, rest = data.split(n0)
    assert (first.n, rest.n) == (n0, 20 - n0)
    np.testing.assert_array_equal(first.contexts, x[:n0])
    np.testing.assert_array_equal(rest.contexts, x[n0:])
    np.testing.assert_array_equal(first.differences, d[:n0])
    np.testing.assert_array_equal(rest.labels, y[n0:])
    np.testing.assert_array_equal(rest.actions, actions[n0:])


def test_split_none_returns_the_whole_data_twice():
    data = PreferenceData(*_arrays())
    first, rest = data.split(None)
    assert first is data and rest is data


@pytest.mark.parametrize("n0", [0, -3, 20, 21])
def test_split_out_of_range_names_n_initial(n0):
    data = PreferenceData(*_arrays())
    with pytest.raises(ValueError, match=r"n_initial must be in \[1, 19\]"):
        data.split(n0)


def test_a_split_of_counted_rows_is_the_split_of_the_comparisons_they_stand_for():
    x, d, y = _arrays()
    counts = np.random.default_rng(3).integers(0, 4, size=20)
    counts[[0, 7]] = [2, 3]  # never all zero; a zero row sits inside, before and after cuts
    data = PreferenceData(x, d, y, counts=counts)
    expanded = repeated_rows(data, counts)
    total = int(counts.sum())
    with pytest.raises(ValueError, match=rf"n_initial must be in \[1, {total - 1}\]"):
        data.split(total)
    for n0 in range(1, total):
        parts = data.split(n0)
        assert [part.n_comparisons for part in parts] == [n0, total - n0]
        for part, rows in zip(parts, (slice(0, n0), slice(n0, None)), strict=True):
            again = repeated_rows(part, part.counts.astype(int))
            np.testing.assert_array_equal(again.contexts, expanded.contexts[rows])
            np.testing.assert_array_equal(again.differences, expanded.differences[rows])
            np.testing.assert_array_equal(again.labels, expanded.labels[rows])


@pytest.mark.parametrize("n0", [2.0, True, "3"])
def test_split_non_integer_names_n_initial(n0):
    data = PreferenceData(*_arrays())
    with pytest.raises(TypeError, match="n_initial must be an integer"):
        data.split(n0)


def test_subset_by_slice_mask_array_and_integer():
    x, d, y = _arrays()
    data = PreferenceData(x, d, y)
    mask = np.arange(20) % 3 == 0
    for index, rows in ((slice(2, 8), np.arange(2, 8)), (mask, np.flatnonzero(mask)),
                        (np.array([4, 0, 4]), np.array([4, 0, 4])), (7, np.array([7]))):
        sub = data.subset(index)
        np.testing.assert_array_equal(sub.contexts, x[rows])
        np.testing.assert_array_equal(sub.differences, d[rows])
        np.testing.assert_array_equal(sub.labels, y[rows])
        assert not sub.contexts.flags.writeable


# ----------------------------------------------------------------------------- Population


def _population_arrays(n=6, a=3, d_x=2, d_phi=4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d_x)), rng.standard_normal((n, a, d_phi))


def test_population_valid_and_states_relabelled():
    x, f = _population_arrays()
    pop = Population(x, f, np.array([7, 7, 3, 3, 10, 3]))
    assert (pop.n, pop.n_actions, pop.n_states) == (6, 3, 3)
    np.testing.assert_array_equal(pop.states, [1, 1, 0, 0, 2, 0])
    assert "states=3" in repr(pop) and "actions=3" in repr(pop)


def test_population_validation_names_the_argument():
    x, f = _population_arrays()
    groups = np.arange(6)
    with pytest.raises(ValueError, match="features must be 3-dimensional"):
        Population(x, f[:, 0], groups)
    with pytest.raises(ValueError, match="contexts has 6 rows, features has 5"):
        Population(x, f[:5], groups)
    with pytest.raises(ValueError, match=r"states must be an integer array of shape \(6,\)"):
        Population(x, f, groups[:5])
    with pytest.raises(ValueError, match="states must be an integer array"):
        Population(x, f, groups.astype(float))
    bad = f.copy()
    bad[1, 2, 3] = np.nan
    with pytest.raises(ValueError, match=r"features\[\(?1, 2, 3\)?\]"):
        Population(x, bad, groups)
    with pytest.raises(ValueError, match="contexts is empty"):
        Population(np.zeros((0, 2)), f[:0], groups[:0])


def test_ties_and_weights_are_kept_through_subset_frame_and_fingerprint():
    x, d, y = _arrays()
    y = y.astype(float)
    y[[3, 5]] = 0.5
    w = np.linspace(0.5, 2.0, y.size)
    data = PreferenceData(x, d, y, weights=w)
    assert data.has_ties and data.labels.dtype == np.float64
    np.testing.assert_array_equal(np.flatnonzero(data.ties), [3, 5])
    part = data.subset([3, 4])
    np.testing.assert_array_equal(part.labels, [0.5, y[4]])
    np.testing.assert_array_equal(part.weights, w[[3, 4]])
    frame = data.to_frame()
    back = PreferenceData.from_frame(frame, context_columns=[c for c in frame if c.startswith("x")],
                                     difference_columns=[c for c in frame if c.startswith("dphi")],
                                     weight_column="weight")
    assert back.fingerprint == data.fingerprint
    assert PreferenceData(x, d, y).fingerprint != data.fingerprint  # the weights are part of the data
    assert PreferenceData(x, d, y.astype(int).clip(0, 1)).labels.dtype == np.int8


def test_from_frame_maps_arena_tie_strings_to_one_half():
    frame = pd.DataFrame({"x": [1.0, 1.0, 1.0, 1.0], "d": [1.0, -1.0, 2.0, 0.5],
                          "y": np.array([1, 0, "tie", "tie (bothbad)"], dtype=object)})
    data = PreferenceData.from_frame(frame, context_columns=["x"], difference_columns=["d"])
    np.testing.assert_array_equal(data.labels, [1, 0, 0.5, 0.5])
    with pytest.raises(ValueError, match=r"label_column 'y' holds strings \(e.g. 'draw'\).*tie_values"):
        PreferenceData.from_frame(frame.assign(y=np.array([1, 0, "draw", "tie"], dtype=object)),
                                  context_columns=["x"], difference_columns=["d"])


@pytest.mark.parametrize("bad, message", [
    (np.r_[-1.0, np.ones(19)], r"weights\[0\] = -1.0; weights must be positive"),
    (np.zeros(20), r"weights\[0\] = 0.0; weights must be positive"),
    (np.ones(3), r"weights has 3 entries, expected one per comparison \(20\)"),
    (np.r_[np.nan, np.ones(19)], r"weights.*(NaN|nan|finite)")])
def test_bad_weights_are_refused_naming_the_argument(bad, message):
    x, d, y = _arrays()
    with pytest.raises(ValueError, match=message):
        PreferenceData(x, d, y, weights=bad)


def test_all_ties_warn_as_ties_not_as_one_class():
    from bayes_loco._checks import check_data
    from bayes_loco.exceptions import DataWarning

    x, d, _ = _arrays()
    data = PreferenceData(x, d, np.full(x.shape[0], 0.5))
    with pytest.warns(DataWarning, match=r"all 20 comparisons are ties \(y = 0.5\)") as caught:
        check_data(data)
    assert not any("have y = 0" in str(w.message) for w in caught)


# ------------------------------------------------------------------------ the identified rank


def _short_spans(seed=0, n=300):
    """d_x = 6 contexts spanning 4 dimensions, d_φ = 5 differences of one-hot actions spanning 4."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 4)) @ rng.standard_normal((4, 6))
    pairs = rng.integers(0, 5, (n, 2))
    d = np.eye(5)[pairs[:, 1]] - np.eye(5)[pairs[:, 0]]
    return x, d, rng.integers(0, 2, n)


def test_identified_rank_is_the_smaller_span_by_numpy_s_rank():
    x, d, y = _short_spans()
    data = PreferenceData(x, d, y)
    assert data.identified_rank() == min(np.linalg.matrix_rank(x), np.linalg.matrix_rank(d)) == 4
    assert data.identified_rank(2) == 2
    narrow = PreferenceData(x[:, :3], d, y)  # three contexts: the contexts' span is the smaller
    assert narrow.identified_rank() == 3
    with pytest.raises(ValueError, match="at_most"):
        data.identified_rank(0)


def test_a_rank_above_the_spans_warns_once_naming_the_span_and_the_bound():
    import warnings

    import bayes_loco as bl
    from bayes_loco.exceptions import DataWarning

    x, d, y = _short_spans(1)
    data = PreferenceData(x, d, y)
    with pytest.warns(DataWarning, match=r"rank 5 exceeds .*the contexts span 4 and the differences span 4.*"
                                         r"at most 4") as caught:
        bl.fit_prs(data, 5)  # which fits FGD inside: the inner call stays quiet
    assert sum("exceeds the dimensions" in str(w.message) for w in caught) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)
        bl.fit_low_rank(data, 4)
        selection = bl.select_rank(data)
    np.testing.assert_array_equal(selection.ranks, [1, 2, 3, 4])  # not 1 … min(d_x, d_φ) = 5
    three = np.eye(3)[np.random.default_rng(1).integers(0, 3, (300, 2))]
    narrow = PreferenceData(x, three[:, 1] - three[:, 0], y)  # three actions: the differences span 2
    with pytest.warns(DataWarning, match=r"^ranks: rank 3 exceeds .*\(the differences span 2\)"):
        bl.select_rank(narrow, ranks=[1, 3])


def test_the_posterior_fit_warns_of_a_rank_above_the_spans():
    import bayes_loco as bl
    from bayes_loco.exceptions import DataWarning

    x, d, y = _short_spans(2, n=200)
    with pytest.warns(DataWarning, match=r"rank 5 exceeds .*Fit a rank of at most 4"):
        bl.bayes.fit_posterior(PreferenceData(x, d, y), 5, method="map")
