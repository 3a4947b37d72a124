"""Offline pairwise preference data (x_t, φ(s_t, a_t0), φ(s_t, a_t1), y_t).

The contextual Bradley–Terry–Luce model sees the features of the two answers only
through their difference Δφ_t = φ(s_t, a_t1) − φ(s_t, a_t0). ``PreferenceData`` stores
either that difference (dense features) or the pair of item indices (a_t0, a_t1) with an
item table Φ (:mod:`bayes_loco.indexed`: Δφ_t = Φ[a_t1] − Φ[a_t0] is then never formed on the
roads that need only products with it); ``y_t = 1`` means answer ``a_t1`` was preferred,
``y_t = ½`` a tie. Comparisons may carry counts (frequency weights) and sampling weights, and
the user's names for contexts, features and items.
"""

from __future__ import annotations

import functools
from dataclasses import InitVar, dataclass, field

import numpy as np
import pandas as pd
from scipy import sparse

from ._frames import TIE_VALUES, array_differences, frame_arguments, item_arguments
from ._regroup import aggregate, comparisons_fingerprint, items_on, split_counted
from ._validation import as_counts, as_float_array, as_labels, as_names, as_weights, check_int
from .indexed import check_items
from .linalg import span_dimension


@dataclass(frozen=True, eq=False)
class PreferenceData:
    """Validated pairwise feedback.

    Build it with :meth:`from_arrays`, :meth:`from_items` or :meth:`from_frame`; the
    constructor validates too, so every instance is consistent.

    Attributes
    ----------
    contexts : ndarray, shape (N, d_x)
        Person contexts x_t.
    differences : ndarray, shape (N, d_φ)
        Feature differences Δφ_t = φ(s_t, a_t1) − φ(s_t, a_t0). Given as None with
        ``item_features``: Δφ_t = [Φ[a_t1] − Φ[a_t0], E_t] is formed (once, then kept) only
        when a road asks for the dense array; :attr:`delta` gives it without forming it.
    labels : ndarray, shape (N,)
        y_t ∈ {0, ½, 1}; 1 means a_t1 was preferred, ½ is a tie. int8 without ties,
        float64 with them. How a fit reads a tie is its ``ties=`` argument.
    actions : ndarray of int, shape (N, 2), optional
        Action (item) indices (a_t0, a_t1); with ``item_features`` they index its rows.
    weights : ndarray of float, shape (N,), optional
        Positive sampling weights w_t (each comparison's log-likelihood term is
        multiplied by w_t and the Wald set is the sandwich's, as statsmodels' ``var_weights``);
        None means all 1.
    counts : ndarray of float, shape (N,), optional
        Frequency weights f_t ≥ 0, whole numbers: row t stands for f_t identical comparisons
        (statsmodels' ``freq_weights``); every fit and set equals the one on the expanded rows.
        None means all 1.
    item_features : ndarray or scipy.sparse array, shape (A, d_item), optional
        Φ, the features of each item, indexed by ``actions``; with it ``differences`` is None.
    comparison_features : ndarray, shape (N, d_e), optional
        Per-comparison difference columns (Arena's style differences) appended after the
        items' (only with ``item_features``).
    context_names, feature_names, item_names : tuple of str, optional
        The user's names of the d_x context columns, the d_φ feature columns and the A items;
        summaries, leaderboards and decision tables print them.
    winner_first : bool
        True when no label column was given because a_t1 is always the preferred item (the
        winner/loser layout of sports results): every y_t = 1 is then expected, not warned about.
    copy : bool, init only
        Copy float64 ``contexts`` and ``differences`` before making them read-only
        (default); False makes the caller's arrays themselves read-only instead, so a
        generator of N × d_φ = 100,000 × 4,096 differences (3.3 GB) does not hold two.
    """

    contexts: np.ndarray
    differences: np.ndarray | None
    labels: np.ndarray
    actions: np.ndarray | None = field(default=None)
    copy: InitVar[bool] = True
    weights: np.ndarray | None = field(default=None, kw_only=True)
    counts: np.ndarray | None = field(default=None, kw_only=True)
    item_features: np.ndarray | sparse.csr_array | None = field(default=None, kw_only=True, repr=False)
    comparison_features: np.ndarray | None = field(default=None, kw_only=True, repr=False)
    context_names: tuple[str, ...] | None = field(default=None, kw_only=True)
    feature_names: tuple[str, ...] | None = field(default=None, kw_only=True)
    item_names: tuple[str, ...] | None = field(default=None, kw_only=True)
    winner_first: bool = field(default=False, kw_only=True)

    def __post_init__(self, copy: bool):
        contexts = as_float_array(self.contexts, "contexts", 2)
        labels = as_labels(self.labels)
        n = contexts.shape[0]
        indexed = self.item_features is not None
        if labels.shape[0] != n:
            raise ValueError(f"contexts has {n} rows, labels has {labels.shape[0]}")
        if indexed:
            delta = check_items(self.item_features, self.actions, self.comparison_features, self.differences,
                                n)
            object.__setattr__(self, "item_features", delta.items)
            object.__setattr__(self, "comparison_features", delta.extra)
            object.__delattr__(self, "differences")  # formed on first use (__getattr__)
            object.__setattr__(self, "_delta", delta)
            arrays = (("contexts", contexts, self.contexts),)
        else:
            if self.comparison_features is not None:
                raise ValueError("comparison_features are appended to item_features: give item_features "
                                 "too, or put the columns in differences")
            differences = as_float_array(self.differences, "differences", 2)
            if differences.shape[0] != n:
                raise ValueError(f"contexts has {n} rows, differences has {differences.shape[0]}")
            arrays = (("contexts", contexts, self.contexts), ("differences", differences, self.differences))
        actions = self.actions
        if actions is not None and not indexed:
            actions = np.asarray(actions)
            if actions.shape != (n, 2) or not np.issubdtype(actions.dtype, np.integer):
                raise ValueError(f"actions must be an integer array of shape ({n}, 2), "
                                 f"got {actions.dtype} {actions.shape}")
            actions = actions.copy()
            actions.setflags(write=False)
        elif indexed:
            actions = np.column_stack([delta.item_0, delta.item_1])
            actions.setflags(write=False)
        for name, arr, given in arrays:
            if copy or arr is not given or not arr.flags.owndata:
                arr = arr.copy()  # never freeze the caller's array, nor a view of one
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        labels.setflags(write=False)  # as_labels returned a copy: the caller's array stays writable
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "actions", actions)
        if self.weights is not None:
            object.__setattr__(self, "weights", as_weights(self.weights, n))
        if self.counts is not None:
            object.__setattr__(self, "counts", as_counts(self.counts, n))
        if not isinstance(self.winner_first, bool):
            raise TypeError(f"winner_first must be a bool, got {self.winner_first!r}")
        for name, size in (("context_names", self.d_x), ("feature_names", self.d_phi),
                           ("item_names", None if not indexed else self.item_features.shape[0])):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, as_names(value, name, size))
        if self.item_names is not None and not indexed:
            raise ValueError("item_names name the rows of item_features: give item_features too")

    def __getattr__(self, name):
        # Only reached for attributes not set: the dense Δφ of indexed data, formed on first use.
        if name == "differences" and "_delta" in self.__dict__:
            dense = self.__dict__["_delta"].toarray()
            dense.setflags(write=False)
            object.__setattr__(self, "differences", dense)
            return dense
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def indexed(self) -> bool:
        """True when the comparisons are item indices into ``item_features`` (Δφ never formed on its own)."""
        return "_delta" in self.__dict__

    @property
    def delta(self):
        """ΔΦ for products: an :class:`~bayes_loco.indexed.ItemDifferences` for indexed data (margins,
        scores and information matrices by gathers and segment sums), else the dense ``differences``."""
        return self.__dict__["_delta"] if self.indexed else self.differences

    @classmethod
    def from_arrays(cls, contexts, labels, *, features_1=None, features_0=None,
                    differences=None, actions=None, weights=None, copy: bool = True) -> PreferenceData:
        """Build from arrays: either ``differences`` or both ``features_1`` and ``features_0``.

        Parameters
        ----------
        contexts : array_like, shape (N, d_x)
        labels : array_like, shape (N,)
            1 where the answer with ``features_1`` was preferred, 0 where the other was,
            0.5 for a tie.
        features_1, features_0 : array_like, shape (N, d_φ)
            φ(s_t, a_t1) and φ(s_t, a_t0).
        differences : array_like, shape (N, d_φ)
            Δφ_t directly, instead of the two feature arrays.
        actions : array_like of int, shape (N, 2), optional
        weights : array_like, shape (N,), optional
            Positive per-comparison weights.
        copy : bool
            False: float64 arrays that own their memory are made read-only in place
            instead of copied (the caller must not need to write to them again).

        Returns
        -------
        PreferenceData

        Examples
        --------
        >>> import numpy as np, bayes_loco as bl
        >>> phi = np.eye(3)  # three actions, one-hot features
        >>> data = bl.PreferenceData.from_arrays(np.ones((2, 1)), [1, 0], features_1=phi[[0, 1]],
        ...                                      features_0=phi[[1, 2]], actions=[[1, 0], [2, 1]])
        >>> data.differences
        array([[ 1., -1.,  0.],
               [ 0.,  1., -1.]])
        """
        if not isinstance(copy, bool):
            raise TypeError(f"copy must be a bool, got {copy!r}")
        differences = array_differences(contexts, features_1, features_0, differences)
        return cls(contexts, differences, labels, actions, copy, weights=weights)

    @classmethod
    def from_items(cls, labels, *, item_1, item_0, item_features=None, n_items: int | None = None,
                   contexts=None, comparison_features=None, weights=None, counts=None, item_names=None,
                   context_names=None, feature_names=None) -> PreferenceData:
        """Build from item indices: comparison t compares item a_t1 = ``item_1[t]`` with a_t0 = ``item_0[t]``.

        Δφ_t = [Φ[a_t1] − Φ[a_t0], E_t] is never formed where a fit needs only products with it
        (:mod:`bayes_loco.indexed`).

        Parameters
        ----------
        labels : array_like, shape (N,)
            1 where item_1 was preferred, 0 where item_0 was, 0.5 for a tie.
        item_1, item_0 : array_like of int, shape (N,)
            Indices into the rows of ``item_features`` (0 … A − 1).
        item_features : array_like or scipy.sparse array, shape (A, d_item), optional
            Φ; by default the one-hot table of A items (sparse identity), A = ``n_items`` or
            the number of ``item_names``, or else one more than the largest index.
        n_items : int, optional
        contexts : array_like, shape (N, d_x), optional
            x_t; None means x ≡ 1 (d_x = 1, plain Bradley–Terry's view).
        comparison_features : array_like, shape (N, d_e), optional
            Per-comparison difference columns appended after the items' (style differences).
        weights, counts : array_like, shape (N,), optional
            Sampling weights (w_t > 0) and frequency weights (whole numbers f_t ≥ 0).
        item_names, context_names, feature_names : sequence of str, optional

        Returns
        -------
        PreferenceData

        Examples
        --------
        >>> import bayes_loco as bl
        >>> data = bl.PreferenceData.from_items([1, 1, 0], item_1=[0, 1, 2], item_0=[1, 2, 0],
        ...                                     counts=[3, 2, 1], item_names=["a", "b", "c"])
        >>> data.n, data.n_comparisons, data.d_phi
        (3, 6, 3)
        """
        return cls(labels=labels, weights=weights, counts=counts, comparison_features=comparison_features,
                   **item_arguments(item_1, item_0, item_features, n_items, contexts, comparison_features,
                                    item_names, context_names, feature_names))

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, *, context_columns=None, difference_columns=None,
                   label_column: str | None = "y", weight_column: str | None = None,
                   count_column: str | None = None, item_columns=None, item_features=None,
                   tie_values=TIE_VALUES) -> PreferenceData:
        """Build from a tidy DataFrame with one row per comparison (or per group of them, with counts).

        Either ``difference_columns`` hold Δφ_t, or ``item_columns`` name the two items
        compared (the data are then held as indices into an item table, one-hot by default);
        the frame's column names and the item names become the data's names.

        Parameters
        ----------
        frame : pandas.DataFrame
        context_columns : sequence of str, optional
            Columns holding x_t, in order. Optional with ``item_columns``: x ≡ 1
            (``"intercept"``), plain Bradley–Terry's view.
        difference_columns : sequence of str, optional
            Columns holding Δφ_t; with ``item_columns``, per-comparison difference columns
            appended after the items' features (style differences).
        label_column : str or None
            Column holding y_t: 0, 1, 0.5 (a tie) or one of ``tie_values``; 1 means the item
            of ``item_columns[0]`` was preferred. None with ``item_columns``: the winner/loser
            layout, every row's first item won (y_t = 1, not warned about).
        weight_column : str, optional
            Column holding positive sampling weights (the Wald set is then the sandwich's).
        count_column : str, optional
            Column holding counts: each row stands for that many identical comparisons
            (frequency weights: whole numbers ≥ 0); fits equal those on the expanded rows.
        item_columns : pair of str, optional
            The columns naming the item of y = 1 and the other item (e.g. ``("model_a",
            "model_b")``, ``("winner", "loser")``, ``("home", "away")``).
        item_features : pandas.DataFrame, optional
            Φ, indexed by item name, one column per feature; default one-hot of the items
            (sorted by name), named by the items.
        tie_values : sequence of str
            Label strings that mean a tie (mapped to 0.5); by default Chatbot Arena's
            ``"tie"`` and ``"tie (bothbad)"``.

        Returns
        -------
        PreferenceData

        Examples
        --------
        >>> import pandas as pd, bayes_loco as bl
        >>> games = pd.DataFrame({"home": ["A", "B", "C"], "away": ["B", "C", "A"], "won": [1, 0, 1],
        ...                       "games": [4, 2, 3]})
        >>> data = bl.PreferenceData.from_frame(games, item_columns=("home", "away"), label_column="won",
        ...                                     count_column="games")
        >>> data.item_names, data.n_comparisons
        (('A', 'B', 'C'), 9)
        """
        return cls(**frame_arguments(frame, context_columns=context_columns,
                                     difference_columns=difference_columns,
                                     label_column=label_column, weight_column=weight_column,
                                     count_column=count_column, item_columns=item_columns,
                                     item_features=item_features, tie_values=tie_values))

    @property
    def n(self) -> int:
        """Number of comparisons N."""
        return self.contexts.shape[0]

    @property
    def d_x(self) -> int:
        return self.contexts.shape[1]

    @property
    def d_phi(self) -> int:
        return self.delta.shape[1]

    @property
    def n_comparisons(self) -> int:
        """The comparisons these rows stand for: Σ_t f_t with counts, else N (the N of every statistic)."""
        return self.n if self.counts is None else round(float(self.counts.sum()))

    def __len__(self) -> int:
        return self.n

    @property
    def ties(self) -> np.ndarray:
        """Boolean mask of the tied comparisons (y_t = ½)."""
        return self.labels == 0.5

    @property
    def has_ties(self) -> bool:
        return bool(self.labels.dtype.kind == "f" and self.ties.any())

    @property
    def weighted(self) -> bool:
        """True when some comparison carries a weight other than 1."""
        return self.weights is not None and bool((self.weights != 1).any())

    @property
    def sample_weights(self) -> np.ndarray:
        """w_t for every comparison (ones when the data carry no weights)."""
        return np.ones(self.n) if self.weights is None else self.weights

    @property
    def loss_weights(self) -> np.ndarray:
        """f_t w_t, what each row's log-likelihood term is multiplied by (ones without counts and weights)."""
        return self.sample_weights if self.counts is None else self.counts * self.sample_weights

    def aggregate(self) -> PreferenceData:
        """Identical rows (same context, same comparison, same label and weight) as one row with their count.

        The sufficient statistics of the likelihood: every fit, and both covariances, equal
        those on these rows (statsmodels' ``freq_weights``). Item-indexed data without
        per-comparison columns and one context for all (plain Bradley–Terry) are keyed by
        (pair, label) alone in O(N); others by their whole rows (``np.unique``).

        Returns
        -------
        PreferenceData
            The distinct rows, in order of first appearance, with ``counts``.

        Examples
        --------
        >>> import bayes_loco as bl
        >>> data = bl.PreferenceData.from_items([1, 1, 0, 1], item_1=[0, 0, 0, 1], item_0=[1, 1, 1, 2])
        >>> compact = data.aggregate()
        >>> compact.n, compact.counts.tolist()
        (3, [2.0, 1.0, 1.0])
        """
        return aggregate(self)

    @functools.cached_property
    def fingerprint(self) -> str:
        """A hash of the comparisons (:func:`~bayes_loco._validation.fingerprint`): which data a fit saw."""
        return comparisons_fingerprint(self)

    @functools.cached_property
    def support(self) -> tuple[np.ndarray, np.ndarray]:
        """Indices of the context and the feature coordinates some comparison reaches.

        The columns of X and of ΔΦ that are not identically 0. Entries of Θ outside
        these rows × columns never enter a margin x_tᵀΘΔφ_t (the paper's state
        features cancel in every difference φ(s, a₁) − φ(s, a₀)), so the MLE and its
        Gram matrix are computed on the support alone.
        """
        rows = np.flatnonzero(np.any(self.contexts != 0, axis=0))
        if not self.indexed:
            return rows, np.flatnonzero(np.any(self.differences != 0, axis=0))
        inner = np.flatnonzero(np.any(self.delta.pair_rows()[0] != 0, axis=0))
        extra = self.comparison_features
        outer = [] if extra is None else np.flatnonzero(np.any(extra != 0, axis=0)) + self.delta.d_item
        return rows, np.concatenate([inner, outer]).astype(np.intp)

    def distinct_differences(self) -> np.ndarray:
        """Rows spanning the same space as the Δφ_t, with the same nonzero columns.

        What a span or a support needs of the differences without the N × d_φ array: for
        item-indexed data without per-comparison columns the Δφ of each distinct compared pair.

        Returns
        -------
        ndarray, shape (P, d_φ)
            One row per distinct pair (item-indexed data), else ``differences`` itself (P = N).

        Examples
        --------
        >>> import bayes_loco as bl
        >>> games = bl.PreferenceData.from_items([1, 0, 1, 1], item_1=[0, 0, 1, 0], item_0=[1, 1, 2, 1])
        >>> games.distinct_differences().shape  # pairs (0, 1) and (1, 2)
        (2, 3)
        """
        if self.indexed and self.comparison_features is None:
            return self.delta.pair_rows()[0]
        return self.differences

    def identified_rank(self, at_most: int | None = None) -> int:
        """The largest rank of Θ these data determine, capped at ``at_most`` (default min(d_x, d_φ)).

        A margin x_tᵀΘΔφ_t sees Θ only through PᵀΘQ, P and Q orthonormal bases of the
        span of the contexts (d_x' dimensions) and of the differences (m), so at most
        min(d_x', m) components of Θ are fixed by the data; the rest of a higher-rank Θ
        by the prior, the penalty or the start. Counted by
        :func:`~bayes_loco.linalg.span_dimension`, in about N·(d_x + d_φ)·``at_most`` flops.

        Parameters
        ----------
        at_most : int, optional
            The cap, ≥ 1.

        Returns
        -------
        int

        Examples
        --------
        >>> data.identified_rank(), data.identified_rank(at_most=1)
        (3, 1)
        """
        limit = min(self.d_x, self.d_phi) if at_most is None else check_int(at_most, "at_most", 1)
        return min(span_dimension(self.contexts, limit), span_dimension(self.distinct_differences(), limit))

    def __repr__(self) -> str:
        f = np.ones(self.n) if self.counts is None else self.counts  # label statistics count comparisons
        extra = f", ties={f @ self.ties:.0f}" if self.has_ties else ""
        extra += ", weighted" if self.weights is not None else ""
        extra += f", counts={self.n_comparisons:.0f}" if self.counts is not None else ""
        extra += f", items={self.item_features.shape[0]}" if self.indexed else ""
        return (f"PreferenceData(N={self.n}, d_x={self.d_x}, d_phi={self.d_phi}, "
                f"mean(y)={f @ self.labels / f.sum():.3f}{extra})")

    def subset(self, index) -> PreferenceData:
        """Rows ``index`` (slice, integer or boolean array) as a new ``PreferenceData``.

        Parameters
        ----------
        index : slice, int or array of int or bool

        Returns
        -------
        PreferenceData

        Examples
        --------
        >>> data.subset(slice(0, 100)).n, data.subset(data.labels == 1).n == int((data.labels == 1).sum())
        (100, True)
        """
        try:
            idx = np.arange(self.n)[index]
        except IndexError as exc:
            raise ValueError(f"index does not select rows of these {self.n} comparisons: {exc}") from None
        if np.size(idx) == 0:
            raise ValueError(f"index selects no rows of these {self.n} comparisons")
        if np.ndim(idx) == 0:
            idx = np.atleast_1d(idx)
        return self._rows(idx)

    def _rows(self, idx, counts=None) -> PreferenceData:
        """Rows ``idx`` (an index array) with everything else kept; ``counts`` replaces theirs."""
        actions = None if self.actions is None else self.actions[idx]
        pick = {k: None if getattr(self, k) is None else getattr(self, k)[idx]
                for k in ("weights", "counts", "comparison_features")}
        if counts is not None:
            pick["counts"] = counts
        names = {k: getattr(self, k) for k in ("context_names", "feature_names", "item_names")}
        if not self.indexed:
            del pick["comparison_features"]
            return PreferenceData(self.contexts[idx], self.differences[idx], self.labels[idx], actions,
                                  **pick, **names, winner_first=self.winner_first)
        return PreferenceData(self.contexts[idx], None, self.labels[idx], actions, **pick, **names,
                              item_features=self.item_features, winner_first=self.winner_first)

    def difference_rows(self, lo: int, hi: int) -> np.ndarray:
        """Dense Δφ_t of rows lo … hi − 1, without forming the whole N × d_φ array of indexed data.

        Parameters
        ----------
        lo, hi : int
            The rows, as the slice ``lo:hi``.

        Returns
        -------
        ndarray, shape (hi − lo, d_φ)

        Examples
        --------
        >>> import bayes_loco as bl
        >>> games = bl.PreferenceData.from_items([1, 0, 1], item_1=[0, 0, 1], item_0=[1, 2, 2])
        >>> games.difference_rows(1, 3)
        array([[ 1.,  0., -1.],
               [ 0.,  1., -1.]])
        """
        if self.indexed and "differences" not in self.__dict__:
            return self.delta.rows(slice(lo, hi)).toarray()
        return self.differences[lo:hi]

    def on_items(self, reference: PreferenceData) -> PreferenceData:
        """These comparisons re-expressed on ``reference``'s item table, items matched by name.

        Two files read apart may order (or drop the reference column of) their items
        differently; a fit on one predicts the other only after this. Returns ``self`` when
        there is nothing to match (either side without item names, or the same table).

        Parameters
        ----------
        reference : PreferenceData

        Returns
        -------
        PreferenceData

        Raises
        ------
        ValueError
            Items of these data that ``reference`` does not know, or per-comparison columns
            that differ by name.

        Examples
        --------
        >>> import bayes_loco as bl
        >>> fitted = bl.PreferenceData.from_items([1, 0], item_1=[0, 1], item_0=[1, 2],
        ...                                       item_names=["a", "b", "c"])
        >>> other = bl.PreferenceData.from_items([1], item_1=[0], item_0=[1], item_names=["b", "c"])
        >>> other.on_items(fitted).actions.tolist()  # (c, b) as rows of the fitted table
        [[2, 1]]
        """
        return items_on(self, reference)

    def split(self, n_initial: int | None) -> tuple[PreferenceData, PreferenceData]:
        """Split into the first N₀ comparisons and the rest (the paper's data split).

        ``n_initial=None`` means no split: both parts are the whole data, as in the
        paper's main experiments. With counts, N₀ counts comparisons, as N does
        (:attr:`n_comparisons`): a counted row that straddles the boundary is divided,
        its first comparisons ending the first part and the others opening the rest,
        so the split is that of the comparisons the rows stand for.

        Parameters
        ----------
        n_initial : int or None
            N₀, in [1, N), N the number of comparisons.

        Returns
        -------
        (PreferenceData, PreferenceData)

        Examples
        --------
        >>> [part.n for part in data.split(100)]
        [100, 200]
        >>> counted = bl.PreferenceData.from_items([1, 0], item_1=[0, 1], item_0=[1, 2], counts=[3, 2])
        >>> [part.counts.tolist() for part in counted.split(4)]   # the 5 comparisons' first 4, then 1
        [[3.0, 1.0], [1.0]]
        """
        if n_initial is None:
            return self, self
        return split_counted(self, check_int(n_initial, "n_initial", 1, self.n_comparisons - 1))

    def to_frame(self) -> pd.DataFrame:
        """One row per comparison: ``x0..``, ``dphi0..``, ``y`` and, with weights, ``weight``.

        Returns
        -------
        pandas.DataFrame
            With counts, a column ``count`` too.

        Examples
        --------
        >>> data.to_frame().shape             # d_x + d_φ + 1 columns
        (300, 11)
        """
        cols = {f"x{j}": self.contexts[:, j] for j in range(self.d_x)}
        cols |= {f"dphi{j}": self.differences[:, j] for j in range(self.d_phi)}
        cols["y"] = self.labels
        if self.weights is not None:
            cols["weight"] = self.weights
        if self.counts is not None:
            cols["count"] = self.counts
        return pd.DataFrame(cols)
