"""Comparisons as indices into an item table: Δφ_t = φ(a_t1) − φ(a_t0) without the N × d_φ array.

Real comparisons name two items (models, teams, journals) out of A; their features are a
row each of an item table Φ (A × d_item, one-hot when the items are only names), and
perhaps a few per-comparison columns E (N × d_e: Arena's style differences). Then

    Δφ_t = [Φ[a_t1] − Φ[a_t0], E_t]        (d_φ = d_item + d_e)

and every product the fits need is a gather or a segment sum over the N comparisons plus
a product with Φ, O(N·d_x + A·d_item·d_x) in place of O(N·d_x·d_φ):

- margins η_t = x_tᵀΘΔφ_t: M = Θ_item Φᵀ (d_x × A), then x_t · (M[:, a_t1] − M[:, a_t0]);
- scores Σ_t w_t x_t Δφ_tᵀ: G = Σ_t w_t x_t (e_{a_t1} − e_{a_t0})ᵀ (d_x × A, ``np.bincount``), then GΦ;
- information Σ_t c_t (x_t x_tᵀ) ⊗ Δφ_t Δφ_tᵀ: per pair of context columns a weighted graph
  Laplacian L (A × A) of the compared pairs, then ΦᵀLΦ.

:class:`ItemDifferences` is that ΔΦ; :func:`~bayes_loco.model.margins` and
:func:`~bayes_loco.model.score_matrix` take it wherever they take the dense array.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from ._validation import as_float_array, check_magnitude

# Above this many items the Laplacians are summed as sparse matrices instead of dense A × A arrays.
DENSE_LAPLACIAN_ITEMS = 2048
# Distinct compared pairs are found by a count over all A² pair keys up to this many keys, else by sorting.
DENSE_PAIR_KEYS = 2**24


@dataclass(frozen=True, eq=False)
class ItemDifferences:
    """ΔΦ (N × d_φ) held as item indices, the item table and the per-comparison columns.

    Attributes
    ----------
    item_1, item_0 : ndarray of intp, shape (N,)
        a_t1 and a_t0, indices into the rows of ``items``.
    items : ndarray or scipy.sparse.csr_array, shape (A, d_item)
        Φ: the features of each item.
    extra : ndarray, shape (N, d_e), or None
        Per-comparison difference columns appended after the items' (style differences).
    """

    item_1: np.ndarray
    item_0: np.ndarray
    items: np.ndarray | sparse.csr_array
    extra: np.ndarray | None = None

    @property
    def n_items(self) -> int:
        return self.items.shape[0]

    @property
    def d_item(self) -> int:
        return self.items.shape[1]

    @property
    def d_extra(self) -> int:
        return 0 if self.extra is None else self.extra.shape[1]

    @property
    def shape(self) -> tuple[int, int]:
        return self.item_1.shape[0], self.d_item + self.d_extra

    @property
    def nbytes(self) -> int:
        """The bytes the dense ΔΦ would take (what :func:`~bayes_loco.model.score_matrix` sizes by)."""
        return 8 * self.shape[0] * self.shape[1]

    def __len__(self) -> int:
        return self.shape[0]

    def rows(self, index) -> ItemDifferences:
        """The comparisons ``index`` (any NumPy index of rows)."""
        extra = None if self.extra is None else self.extra[index]
        return ItemDifferences(self.item_1[index], self.item_0[index], self.items, extra)

    def columns(self, cols: np.ndarray) -> ItemDifferences:
        """The columns ``cols`` (sorted indices into d_φ) of ΔΦ."""
        cols = np.asarray(cols)
        inner, outer = cols[cols < self.d_item], cols[cols >= self.d_item] - self.d_item
        items = self.items[:, inner]
        extra = None if self.extra is None or not outer.size else self.extra[:, outer]
        return ItemDifferences(self.item_1, self.item_0, items, extra)

    def _item_rows(self, index: np.ndarray) -> np.ndarray:
        rows = self.items[index]
        return rows.toarray() if sparse.issparse(rows) else np.asarray(rows, dtype=float)

    def toarray(self) -> np.ndarray:
        """The dense ΔΦ, N × d_φ (what the roads without an indexed path read)."""
        inner = self._item_rows(self.item_1) - self._item_rows(self.item_0)
        return inner if self.extra is None else np.hstack([inner, self.extra])

    def pair_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct pairs (a₁, a₀) compared, as their dense Δφ rows (P × d_item), and each row's pair."""
        keys = self.item_1.astype(np.int64) * self.n_items + self.item_0
        if self.n_items**2 <= DENSE_PAIR_KEYS:  # presence over every key: O(N + A²), no sort
            present = np.bincount(keys, minlength=self.n_items**2) > 0
            unique = np.flatnonzero(present)
            inverse = (np.cumsum(present) - 1)[keys]
        else:
            unique, inverse = np.unique(keys, return_inverse=True)
        a1, a0 = np.divmod(unique, self.n_items)
        return self._item_rows(a1) - self._item_rows(a0), inverse

    def _split(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return theta[:, : self.d_item], theta[:, self.d_item:]

    def margins(self, theta: np.ndarray, contexts: np.ndarray) -> np.ndarray:
        """η_t = x_tᵀ Θ Δφ_t: a gather of M = Θ_item Φᵀ (d_x × A) and, for E, a row-wise dot."""
        inner, outer = self._split(theta)
        m = np.asarray((self.items @ inner.T).T)  # M = Θ_item Φᵀ, dense d_x × A
        if contexts.shape[1] == 1:
            eta = contexts[:, 0] * (m[0, self.item_1] - m[0, self.item_0])
        else:
            eta = np.einsum("tk,tk->t", contexts, (m[:, self.item_1] - m[:, self.item_0]).T)
        if self.extra is not None:
            eta += np.einsum("tj,tj->t", contexts @ outer, self.extra)
        return eta

    def times(self, v: np.ndarray) -> np.ndarray:
        """ΔΦ V (N × r) for V (d_φ × r): a gather of ΦV_item, plus E V_e."""
        inner = np.asarray(self.items @ v[: self.d_item])
        out = inner[self.item_1] - inner[self.item_0]
        return out if self.extra is None else out + self.extra @ v[self.d_item:]

    def transpose_times(self, m: np.ndarray) -> np.ndarray:
        """ΔΦᵀ M (d_φ × r) for M (N × r): per column a segment sum by item, then Φᵀ; and Eᵀ M."""
        a = self.n_items
        by_item = np.column_stack([np.bincount(self.item_1, m[:, j], a) - np.bincount(self.item_0, m[:, j], a)
                                   for j in range(m.shape[1])])
        inner = np.asarray(self.items.T @ by_item)
        return inner if self.extra is None else np.vstack([inner, self.extra.T @ m])

    def item_scores(self, weights: np.ndarray, contexts: np.ndarray) -> np.ndarray:
        """G = Σ_t w_t x_t (e_{a_t1} − e_{a_t0})ᵀ, d_x × A: one segment sum per context column."""
        a = self.n_items
        out = np.empty((contexts.shape[1], a))
        for k in range(contexts.shape[1]):
            wk = weights * contexts[:, k]
            out[k] = np.bincount(self.item_1, wk, a) - np.bincount(self.item_0, wk, a)
        return out

    def score(self, weights: np.ndarray, contexts: np.ndarray) -> np.ndarray:
        """Σ_t w_t x_t Δφ_tᵀ (d_x × d_φ) = [GΦ, Xᵀ diag(w) E]."""
        inner = np.asarray((self.items.T @ self.item_scores(weights, contexts).T).T)
        if self.extra is None:
            return inner
        return np.hstack([inner, (weights[:, None] * contexts).T @ self.extra])

    def laplacian(self, weights: np.ndarray):
        """L = Σ_t w_t (e_{a_t1} − e_{a_t0})(e_{a_t1} − e_{a_t0})ᵀ (A × A; sparse above
        :data:`DENSE_LAPLACIAN_ITEMS` items)."""
        a = self.n_items
        degree = np.bincount(self.item_1, weights, a) + np.bincount(self.item_0, weights, a)
        if a > DENSE_LAPLACIAN_ITEMS:
            cross = sparse.coo_array((weights, (self.item_1, self.item_0)), shape=(a, a))
            return (sparse.diags_array(degree) - cross - cross.T).tocsr()
        # one segment sum over the a² pair keys: O(N + A²)
        cross = np.bincount(self.item_1.astype(np.int64) * a + self.item_0, weights, a * a).reshape(a, a)
        lap = -(cross + cross.T)
        lap[np.diag_indices(a)] += degree
        return lap

    def gram(self, weights: np.ndarray) -> np.ndarray:
        """Σ_t w_t Δφ_t Δφ_tᵀ (d_φ × d_φ): [[ΦᵀLΦ, ΦᵀB], [BᵀΦ, Eᵀ diag(w) E]], B = Σ_t w_t (e₁ − e₀) E_tᵀ."""
        phi = self.items
        inner = np.asarray(phi.T @ (self.laplacian(weights) @ phi))
        inner = inner.toarray() if sparse.issparse(inner) else inner
        if self.extra is None:
            return inner
        ones = np.ones((weights.shape[0], 1))
        b = np.column_stack([self.item_scores(weights * self.extra[:, j], ones)[0]
                             for j in range(self.d_extra)])
        cross = np.asarray(phi.T @ b)
        corner = self.extra.T @ (weights[:, None] * self.extra)
        return np.block([[inner, cross], [cross.T, corner]])

    def vec_gram(self, weights: np.ndarray, contexts: np.ndarray) -> np.ndarray:
        """Σ_t w_t z_t z_tᵀ with z_t = vec(x_t Δφ_tᵀ) (row-major), d_x·d_φ square: block (p, q) is
        Σ_t w_t x_tp x_tq Δφ_t Δφ_tᵀ, each a :meth:`gram`; with several contexts and no per-comparison
        columns, grouped by compared pair instead (:meth:`_pair_vec_gram`)."""
        d_x, d_phi = contexts.shape[1], self.shape[1]
        if d_x > 1 and self.extra is None:
            return self._pair_vec_gram(weights, contexts)
        out = np.empty((d_x * d_phi, d_x * d_phi))
        for p in range(d_x):
            for q in range(p, d_x):
                block = self.gram(weights * contexts[:, p] * contexts[:, q])
                out[p * d_phi:(p + 1) * d_phi, q * d_phi:(q + 1) * d_phi] = block
                out[q * d_phi:(q + 1) * d_phi, p * d_phi:(p + 1) * d_phi] = block.T
        return out

    def _pair_vec_gram(self, weights: np.ndarray, contexts: np.ndarray) -> np.ndarray:
        """:meth:`vec_gram` by compared pair g: M_g = Σ_{t ∈ g} w_t x_t x_tᵀ (d_x × d_x, one small product
        per pair), then Σ_g M_g ⊗ δ_g δ_gᵀ as one product of (d_x² × P) and (P × d_φ²), δ_g the pair's
        Δφ: O(N d_x² + P d_x² d_φ²) where the blocks take O(d_x² (N + A² d_φ))."""
        d_x, d_phi = contexts.shape[1], self.d_item
        rows, pair = self.pair_rows()
        order = np.argsort(pair, kind="stable")
        starts = np.searchsorted(pair[order], np.arange(rows.shape[0] + 1))
        moments = np.empty((rows.shape[0], d_x, d_x))
        for g in range(rows.shape[0]):
            take = order[starts[g]:starts[g + 1]]
            x = contexts[take]
            moments[g] = (x * weights[take, None]).T @ x
        outer = (rows[:, :, None] * rows[:, None, :]).reshape(rows.shape[0], d_phi * d_phi)
        full = moments.reshape(rows.shape[0], d_x * d_x).T @ outer  # [(p, q), (i, j)]
        return full.reshape(d_x, d_x, d_phi, d_phi).transpose(0, 2, 1, 3).reshape(d_x * d_phi, d_x * d_phi)


def check_items(item_features, actions, comparison_features, differences, n: int) -> ItemDifferences:
    """The indexed parts of a :class:`~bayes_loco.PreferenceData` as :class:`ItemDifferences`, or one error
    naming the argument (``item_features``, ``actions``, ``comparison_features``)."""
    if differences is not None:
        raise ValueError("give either differences or item_features (with actions indexing its rows), "
                         "not both")
    if sparse.issparse(item_features):
        items = sparse.csr_array(item_features, dtype=float)
        if items.ndim != 2:
            raise ValueError(f"item_features must be 2-dimensional (items x features), got shape "
                             f"{items.shape}")
        if items.nnz:
            check_magnitude(items.data, "item_features")
    else:
        items = as_float_array(item_features, "item_features", 2).copy()
        items.setflags(write=False)
    n_items = items.shape[0]
    if actions is None:
        raise ValueError("item_features needs actions: the (a_t0, a_t1) indices of its rows for each "
                         "comparison")
    raw = np.asarray(actions)
    if raw.shape != (n, 2) or not np.issubdtype(raw.dtype, np.integer):
        raise ValueError(f"actions must be an integer array of shape ({n}, 2): the rows of item_features "
                         f"compared, (a_t0, a_t1); got {raw.dtype} {raw.shape}")
    bad = (raw < 0) | (raw >= n_items)
    if bad.any():
        t, side = (int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"actions[{t}, {side}] = {int(raw[t, side])}, but item_features has {n_items} rows "
                         f"(items 0 … {n_items - 1})")
    extra = None
    if comparison_features is not None:
        extra = as_float_array(comparison_features, "comparison_features", 2).copy()
        if extra.shape[0] != n:
            raise ValueError(f"contexts has {n} rows, comparison_features has {extra.shape[0]}")
        extra.setflags(write=False)
    item_0, item_1 = (np.ascontiguousarray(raw[:, j], dtype=np.intp) for j in (0, 1))
    return ItemDifferences(item_1, item_0, items, extra)
