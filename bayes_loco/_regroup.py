"""Data regrouped: identical rows to counts, comparisons moved onto another item table, the first N₀
comparisons split from the rest; and the hash that tells one set of comparisons from another.

Each takes a :class:`~bayes_loco.PreferenceData` and build their result with its own class.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import sparse

from ._validation import fingerprint


def items_on(data, reference):
    """:meth:`~bayes_loco.PreferenceData.on_items`: ``data`` on ``reference``'s item table, by item name."""
    if not (data.indexed and reference.indexed and data.item_names and reference.item_names):
        return data
    same = data.item_names == reference.item_names and data.feature_names == reference.feature_names
    if same and _same_table(data.item_features, reference.item_features):
        return data
    index = pd.Index(reference.item_names)
    codes = index.get_indexer(list(data.item_names))
    used = np.unique(data.actions)
    unknown = [data.item_names[i] for i in used if codes[i] < 0]
    if unknown:
        raise ValueError(f"data compare items {unknown[:5]} that the fit never saw (it knows "
                         f"{len(index)} items): a fit predicts only items of its own table; drop those "
                         "comparisons or refit with them")
    d_item = reference.item_features.shape[1]
    mine, theirs = (tuple(d.feature_names[d.item_features.shape[1]:]) if d.feature_names else None
                    for d in (data, reference))
    if mine != theirs:
        raise ValueError(f"data have per-comparison columns {mine}, the fit {theirs}: they must match by "
                         "name and order")
    return type(data)(data.contexts, None, data.labels, codes[data.actions], weights=data.weights,
                      counts=data.counts, item_features=reference.item_features,
                      comparison_features=data.comparison_features, item_names=reference.item_names,
                      context_names=data.context_names, winner_first=data.winner_first,
                      feature_names=None if reference.feature_names is None else
                      reference.feature_names[: d_item] + (mine or ()))


def _same_table(a, b) -> bool:
    """Whether two item tables (dense or sparse) are equal."""
    if a.shape != b.shape:
        return False
    dense = [m.toarray() if sparse.issparse(m) else np.asarray(m) for m in (a, b)]
    return bool(np.array_equal(*dense))


def aggregate(data):
    """:meth:`~bayes_loco.PreferenceData.aggregate`: the distinct rows with their counts."""
    label_code = np.rint(2 * data.labels.astype(float)).astype(np.int64)  # 0, 1, 2
    simple = (data.indexed and data.comparison_features is None and data.weights is None
              and bool(np.all(data.contexts == data.contexts[0])))
    if simple:
        a = data.item_features.shape[0]
        keys = (data.actions[:, 1].astype(np.int64) * a + data.actions[:, 0]) * 3 + label_code
        _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    else:
        delta = [data.actions, data.comparison_features] if data.indexed else [data.differences]
        rows = np.column_stack([data.contexts, *[d for d in delta if d is not None], label_code,
                                data.sample_weights])
        _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    counts = np.bincount(inverse, data.counts, first.size) if data.counts is not None else \
        np.bincount(inverse, minlength=first.size).astype(float)
    order = np.argsort(first, kind="stable")
    return data._rows(first[order], counts[order])


def split_counted(data, n0: int):
    """:meth:`~bayes_loco.PreferenceData.split`: the first ``n0`` comparisons and the rest, the counted
    row that holds comparison ``n0`` divided between them."""
    if data.counts is None:
        return data.subset(slice(0, n0)), data.subset(slice(n0, None))
    ends = np.cumsum(data.counts)
    cut = int(np.searchsorted(ends, n0))  # the row holding comparison N₀
    first = np.append(data.counts[:cut], n0 - (ends[cut] - data.counts[cut]))
    rest = np.append(ends[cut] - n0, data.counts[cut + 1:])
    # A row whose comparisons all went first would open the rest with count 0.
    tail = 1 if rest[0] == 0 else 0
    return data._rows(np.arange(cut + 1), first), data._rows(np.arange(cut + tail, data.n), rest[tail:])


def comparisons_fingerprint(data) -> str:
    """:attr:`~bayes_loco.PreferenceData.fingerprint`: a hash of the comparisons, which data a fit saw."""
    parts = [data.contexts]
    if data.indexed:
        items = data.item_features
        parts += [data.actions, items.toarray() if sparse.issparse(items) else items]
        parts += [] if data.comparison_features is None else [data.comparison_features]
    else:
        parts.append(data.differences)
    parts.append(data.labels)
    parts += [w for w in (data.weights, data.counts) if w is not None]
    if data.counts is not None:
        parts.append(np.array([1]))  # counts are not weights: the same numbers hash apart
    return fingerprint(*parts)
