"""Reading a user's frame of comparisons into the arrays of a :class:`~bayes_loco.PreferenceData`.

One row per comparison (or per group of identical comparisons, with a count column): the
contexts' and features' columns, the label, and either the feature differences or the two
items compared, by name. The frame's column names and item names become the data's names.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import sparse

from ._validation import as_float_array, check_int

# Label strings that mean a tie in Chatbot Arena's files (``winner``).
TIE_VALUES = ("tie", "tie (bothbad)")
# The context column of data read without contexts (plain Bradley–Terry): x ≡ 1.
INTERCEPT = "intercept"


def _columns(given, name: str, required: bool) -> list[str]:
    if given is None and not required:
        return []
    if given is None or isinstance(given, str) or not all(isinstance(c, str) for c in given):
        raise TypeError(f"{name} must be a sequence of column names (str), got {given!r}")
    given = list(given)
    if not given and required:
        raise ValueError(f"{name} is empty: name at least one column")
    if len(set(given)) != len(given):
        raise ValueError(f"{name} names a column twice: {given}")
    return given


def _labels(frame: pd.DataFrame, label_column: str, tie_values) -> np.ndarray:
    labels = frame[label_column].to_numpy()
    if labels.dtype.kind in "OUS":
        labels = np.where(np.isin(labels, list(tie_values)), 0.5, labels)
        strings = [v for v in labels if isinstance(v, str | bytes)]
        if strings:
            col = f"frame[{label_column!r}]"
            raise ValueError(
                f"label_column {label_column!r} holds strings (e.g. {strings[0]!r}); labels must be 0/1 "
                f"numbers, 0.5 or one of tie_values {tuple(tie_values)}: convert them first, e.g. "
                f"{col}.astype(int) for '0'/'1' or ({col} == 'yes').astype(int) for 'yes'/'no', "
                "or name a string in tie_values if it means a tie")
    return labels


def _item_table(item_features, names: list[str]):
    """Φ and its feature names: the identity (one-hot, sparse) over ``names``, or the user's table
    (a DataFrame indexed by item name, one row per item)."""
    if item_features is None:
        return sparse.identity(len(names), format="csr"), names, names
    if not isinstance(item_features, pd.DataFrame):
        raise TypeError("item_features must be a DataFrame indexed by item name (one row per item, one "
                        f"column per feature), got {type(item_features).__name__}")
    index = item_features.index.astype(str)
    if index.has_duplicates:
        raise ValueError(f"item_features lists item {index[index.duplicated()][0]!r} twice")
    unknown = sorted(set(names) - set(index))
    if unknown:
        raise ValueError(f"items {unknown[:5]} are compared in the frame but have no row in item_features")
    return item_features.to_numpy(), list(index), [str(c) for c in item_features.columns]


def _items(frame: pd.DataFrame, item_columns: list[str], item_features):
    """The item table, its names and (a_t0, a_t1) of each row; one error naming a missing or repeated item."""
    for column in item_columns:
        absent = frame[column].isna().to_numpy()
        if absent.any():
            raise ValueError(f"item column {column!r} is missing in row {int(np.flatnonzero(absent)[0])}: "
                             "every comparison needs both items")
    first, second = (frame[c].astype(str).to_numpy() for c in item_columns)
    same = first == second
    if same.any():
        i = int(np.flatnonzero(same)[0])
        raise ValueError(f"row {i} compares item {first[i]!r} with itself ({item_columns[0]!r} and "
                         f"{item_columns[1]!r} agree): such a comparison says nothing; drop it")
    names = sorted(set(first) | set(second))
    phi, names, feature_names = _item_table(item_features, names)
    index = pd.Index(names)
    actions = np.column_stack([index.get_indexer(second), index.get_indexer(first)])
    return phi, names, feature_names, actions


def frame_arguments(frame: pd.DataFrame, *, context_columns, difference_columns, label_column,
                    weight_column, count_column, item_columns, item_features, tie_values) -> dict:
    """The keyword arguments of :class:`~bayes_loco.PreferenceData` that
    :meth:`~bayes_loco.PreferenceData.from_frame` reads from ``frame`` (see its docstring), or one error
    naming the argument."""
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a pandas DataFrame, got {type(frame).__name__}")
    duplicated = sorted({str(c) for c in frame.columns[frame.columns.duplicated()]})
    if duplicated:
        raise ValueError(f"frame has duplicated column names {duplicated}: a name must pick one column; "
                         "rename them (e.g. frame.columns = [...])")
    items = _columns(item_columns, "item_columns", False)
    if item_columns is not None and len(items) != 2:
        raise ValueError(f"item_columns must name two columns (the item of y = 1, then the other), "
                         f"got {items}")
    contexts = _columns(context_columns, "context_columns", not items)
    differences = _columns(difference_columns, "difference_columns", not items)
    singles = {"label_column": label_column, "weight_column": weight_column, "count_column": count_column}
    for name, given in singles.items():
        if not isinstance(given, str) and not (given is None and (name != "label_column" or items)):
            raise TypeError(f"{name} must be a column name (str), got {given!r}")
    if isinstance(tie_values, str) or not all(isinstance(v, str) for v in tie_values):
        raise TypeError(f"tie_values must be a sequence of str, got {tie_values!r}")
    wanted = [*contexts, *differences, *items, *(c for c in singles.values() if c is not None)]
    missing = [c for c in wanted if c not in frame.columns]
    if missing:
        raise ValueError(f"frame is missing columns {missing}")
    n = len(frame)
    if n == 0:
        raise ValueError("frame has no rows")
    out = {"labels": np.ones(n, dtype=np.int8) if label_column is None else _labels(frame, label_column,
                                                                                    tie_values),
           "winner_first": label_column is None,
           "weights": None if weight_column is None else frame[weight_column].to_numpy(),
           "counts": None if count_column is None else frame[count_column].to_numpy()}
    out["contexts"] = frame[contexts].to_numpy() if contexts else np.ones((n, 1))
    out["context_names"] = tuple(contexts) if contexts else (INTERCEPT,)
    if not items:
        return out | {"differences": frame[differences].to_numpy(), "feature_names": tuple(differences)}
    phi, names, feature_names, actions = _items(frame, items, item_features)
    extra = frame[differences].to_numpy() if differences else None
    return out | {"differences": None, "actions": actions, "item_features": phi, "comparison_features": extra,
                  "item_names": tuple(names), "feature_names": (*feature_names, *differences)}


def names_or_default(names: Sequence[str] | None, prefix: str, size: int) -> list[str]:
    """The user's names, or ``prefix0, prefix1, …``."""
    return list(names) if names is not None else [f"{prefix}{j}" for j in range(size)]


def array_differences(contexts, features_1, features_0, differences):
    """Δφ_t of :meth:`PreferenceData.from_arrays`: ``differences``, or f₁ − f₀ (rows checked against x)."""
    if differences is not None:
        if features_1 is not None or features_0 is not None:
            raise ValueError("give either differences or features_1 and features_0, not both")
        return differences
    if features_1 is None or features_0 is None:
        raise ValueError("features_1 and features_0 are both required when differences is not given")
    f1 = as_float_array(features_1, "features_1", 2)
    f0 = as_float_array(features_0, "features_0", 2)
    if f1.shape != f0.shape:
        raise ValueError(f"features_1 has shape {f1.shape}, features_0 has shape {f0.shape}")
    n = np.shape(contexts)[0] if np.ndim(contexts) else 0
    if f1.shape[0] != n:
        raise ValueError(f"contexts has {n} rows, features_1 has {f1.shape[0]}")
    return f1 - f0


def item_arguments(item_1, item_0, item_features, n_items, contexts, comparison_features, item_names,
                   context_names, feature_names) -> dict:
    """:meth:`PreferenceData.from_items`' arguments of the data: the item table (one-hot of the items by
    default, named by them), the actions (item_0, item_1) and the contexts (x ≡ 1 by default)."""
    item_1, item_0 = np.asarray(item_1), np.asarray(item_0)
    if item_1.ndim != 1 or item_1.shape != item_0.shape:
        raise ValueError(f"item_1 and item_0 must be 1-dimensional of one length, got shapes {item_1.shape} "
                         f"and {item_0.shape}")
    if item_features is None:
        if n_items is None:
            n_items = len(item_names) if item_names is not None else int(max(item_1.max(initial=-1),
                                                                              item_0.max(initial=-1))) + 1
        item_features = sparse.identity(check_int(n_items, "n_items", 1), format="csr")
        if feature_names is None and item_names is not None:
            d_e = 0 if comparison_features is None else np.shape(comparison_features)[1]
            feature_names = tuple(item_names) + tuple(f"e{j}" for j in range(d_e))
    if contexts is None:
        contexts = np.ones((item_1.shape[0], 1))
        context_names = (INTERCEPT,) if context_names is None else context_names
    return {"contexts": contexts, "differences": None, "actions": np.column_stack([item_0, item_1]),
            "item_features": item_features, "item_names": item_names, "context_names": context_names,
            "feature_names": feature_names}
