"""Offline pairwise preference data (x_t, φ(s_t, a_t0), φ(s_t, a_t1), y_t).

The contextual Bradley–Terry–Luce model sees the features of the two answers only
through their difference Δφ_t = φ(s_t, a_t1) − φ(s_t, a_t0), so that is what
``PreferenceData`` stores; ``y_t = 1`` means answer ``a_t1`` was preferred, ``y_t = ½`` a tie.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import numbers
import warnings
from dataclasses import InitVar, dataclass, field

import numpy as np
import pandas as pd
from scipy import sparse

from ._validation import as_float_array, as_labels, as_weights, check_int, check_option, fingerprint
from .exceptions import DataWarning
from .linalg import span_dimension

# Label strings that mean a tie in Chatbot Arena's files (``winner``).
TIE_VALUES = ("tie", "tie (bothbad)")


@dataclass(frozen=True, eq=False)
class PreferenceData:
    """Validated pairwise feedback.

    Build it with :meth:`from_arrays` or :meth:`from_frame`; the constructor
    validates too, so every instance is consistent.

    Attributes
    ----------
    contexts : ndarray, shape (N, d_x)
        Person contexts x_t.
    differences : ndarray, shape (N, d_φ)
        Feature differences Δφ_t = φ(s_t, a_t1) − φ(s_t, a_t0).
    labels : ndarray, shape (N,)
        y_t ∈ {0, ½, 1}; 1 means a_t1 was preferred, ½ is a tie. int8 without ties,
        float64 with them. How a fit reads a tie is its ``ties=`` argument.
    actions : ndarray of int, shape (N, 2), optional
        Action ids (a_t0, a_t1), kept for diagnostics (coverage of actions).
    weights : ndarray of float, shape (N,), optional
        Positive per-comparison weights w_t (each comparison's log-likelihood term is
        multiplied by w_t); None means all 1.
    copy : bool, init only
        Copy float64 ``contexts`` and ``differences`` before making them read-only
        (default); False makes the caller's arrays themselves read-only instead, so a
        generator of N × d_φ = 100,000 × 4,096 differences (3.3 GB) does not hold two.
    """

    contexts: np.ndarray
    differences: np.ndarray
    labels: np.ndarray
    actions: np.ndarray | None = field(default=None)
    copy: InitVar[bool] = True
    weights: np.ndarray | None = field(default=None, kw_only=True)

    def __post_init__(self, copy: bool):
        contexts = as_float_array(self.contexts, "contexts", 2)
        differences = as_float_array(self.differences, "differences", 2)
        labels = as_labels(self.labels)
        n = contexts.shape[0]
        if differences.shape[0] != n:
            raise ValueError(f"contexts has {n} rows, differences has {differences.shape[0]}")
        if labels.shape[0] != n:
            raise ValueError(f"contexts has {n} rows, labels has {labels.shape[0]}")
        actions = self.actions
        if actions is not None:
            actions = np.asarray(actions)
            if actions.shape != (n, 2) or not np.issubdtype(actions.dtype, np.integer):
                raise ValueError(f"actions must be an integer array of shape ({n}, 2), "
                                 f"got {actions.dtype} {actions.shape}")
            actions = actions.copy()
            actions.setflags(write=False)
        for name, arr, given in (("contexts", contexts, self.contexts),
                                 ("differences", differences, self.differences)):
            if copy or arr is not given or not arr.flags.owndata:
                arr = arr.copy()  # never freeze the caller's array, nor a view of one
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        labels.setflags(write=False)  # as_labels returned a copy: the caller's array stays writable
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "actions", actions)
        if self.weights is not None:
            object.__setattr__(self, "weights", as_weights(self.weights, n))

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
        """
        if not isinstance(copy, bool):
            raise TypeError(f"copy must be a bool, got {copy!r}")
        if differences is not None:
            if features_1 is not None or features_0 is not None:
                raise ValueError("give either differences or features_1 and features_0, not both")
            return cls(contexts, differences, labels, actions, copy, weights=weights)
        if features_1 is None or features_0 is None:
            raise ValueError("features_1 and features_0 are both required when differences is not given")
        f1 = as_float_array(features_1, "features_1", 2)
        f0 = as_float_array(features_0, "features_0", 2)
        if f1.shape != f0.shape:
            raise ValueError(f"features_1 has shape {f1.shape}, features_0 has shape {f0.shape}")
        n = np.shape(contexts)[0] if np.ndim(contexts) else 0
        if f1.shape[0] != n:
            raise ValueError(f"contexts has {n} rows, features_1 has {f1.shape[0]}")
        return cls(contexts, f1 - f0, labels, actions, copy, weights=weights)

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, *, context_columns, difference_columns,
                   label_column: str = "y", weight_column: str | None = None,
                   tie_values=TIE_VALUES) -> PreferenceData:
        """Build from a tidy DataFrame with one row per comparison.

        Parameters
        ----------
        frame : pandas.DataFrame
        context_columns, difference_columns : sequence of str
            Columns holding x_t and Δφ_t, in order.
        label_column : str
            Column holding y_t: 0, 1, 0.5 (a tie) or one of ``tie_values``.
        weight_column : str, optional
            Column holding positive per-comparison weights.
        tie_values : sequence of str
            Label strings that mean a tie (mapped to 0.5); by default Chatbot Arena's
            ``"tie"`` and ``"tie (bothbad)"``.
        """
        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"frame must be a pandas DataFrame, got {type(frame).__name__}")
        duplicated = sorted({str(c) for c in frame.columns[frame.columns.duplicated()]})
        if duplicated:
            raise ValueError(f"frame has duplicated column names {duplicated}: a name must pick one column; "
                             "rename them (e.g. frame.columns = [...])")
        columns = {}
        for name, given in (("context_columns", context_columns), ("difference_columns", difference_columns)):
            if isinstance(given, str) or not all(isinstance(c, str) for c in given):
                raise TypeError(f"{name} must be a sequence of column names (str), got {given!r}")
            given = list(given)
            if not given:
                raise ValueError(f"{name} is empty: name at least one column")
            if len(set(given)) != len(given):
                raise ValueError(f"{name} names a column twice: {given}")
            columns[name] = given
        for name, given in (("label_column", label_column), ("weight_column", weight_column)):
            if not isinstance(given, str) and not (name == "weight_column" and given is None):
                raise TypeError(f"{name} must be a column name (str), got {given!r}")
        if isinstance(tie_values, str) or not all(isinstance(v, str) for v in tie_values):
            raise TypeError(f"tie_values must be a sequence of str, got {tie_values!r}")
        wanted = [*columns["context_columns"], *columns["difference_columns"], label_column]
        wanted += [] if weight_column is None else [weight_column]
        missing = [c for c in wanted if c not in frame.columns]
        if missing:
            raise ValueError(f"frame is missing columns {missing}")
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
        return cls(frame[columns["context_columns"]].to_numpy(),
                   frame[columns["difference_columns"]].to_numpy(), labels,
                   weights=None if weight_column is None else frame[weight_column].to_numpy())

    @property
    def n(self) -> int:
        """Number of comparisons N."""
        return self.contexts.shape[0]

    @property
    def d_x(self) -> int:
        return self.contexts.shape[1]

    @property
    def d_phi(self) -> int:
        return self.differences.shape[1]

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

    @functools.cached_property
    def fingerprint(self) -> str:
        """A hash of the comparisons (:func:`~bayes_loco._validation.fingerprint`): which data a fit saw."""
        if self.weights is None:
            return fingerprint(self.contexts, self.differences, self.labels)
        return fingerprint(self.contexts, self.differences, self.labels, self.weights)

    @functools.cached_property
    def support(self) -> tuple[np.ndarray, np.ndarray]:
        """Indices of the context and the feature coordinates some comparison reaches.

        The columns of X and of ΔΦ that are not identically 0. Entries of Θ outside
        these rows × columns never enter a margin x_tᵀΘΔφ_t (the paper's state
        features cancel in every difference φ(s, a₁) − φ(s, a₀)), so the MLE and its
        Gram matrix are computed on the support alone.
        """
        return (np.flatnonzero(np.any(self.contexts != 0, axis=0)),
                np.flatnonzero(np.any(self.differences != 0, axis=0)))

    def identified_rank(self, at_most: int | None = None) -> int:
        """The largest rank of Θ these data determine, capped at ``at_most`` (default min(d_x, d_φ)).

        A margin x_tᵀΘΔφ_t sees Θ only through PᵀΘQ, P and Q orthonormal bases of the
        span of the contexts (d_x' dimensions) and of the differences (m), so at most
        min(d_x', m) components of Θ are fixed by the data; the rest of a higher-rank Θ
        by the prior, the penalty or the start. Counted by
        :func:`~bayes_loco.linalg.span_dimension`, in about N·(d_x + d_φ)·``at_most`` flops.
        """
        limit = min(self.d_x, self.d_phi) if at_most is None else check_int(at_most, "at_most", 1)
        return min(_span_dimensions(self, limit).values())

    def __repr__(self) -> str:
        extra = f", ties={int(self.ties.sum())}" if self.has_ties else ""
        extra += ", weighted" if self.weights is not None else ""
        return (f"PreferenceData(N={self.n}, d_x={self.d_x}, d_phi={self.d_phi}, "
                f"mean(y)={self.labels.mean():.3f}{extra})")

    def subset(self, index) -> PreferenceData:
        """Rows ``index`` (slice, integer or boolean array) as a new ``PreferenceData``."""
        try:
            idx = np.arange(self.n)[index]
        except IndexError as exc:
            raise ValueError(f"index does not select rows of these {self.n} comparisons: {exc}") from None
        if np.size(idx) == 0:
            raise ValueError(f"index selects no rows of these {self.n} comparisons")
        if np.ndim(idx) == 0:
            idx = np.atleast_1d(idx)
        actions = None if self.actions is None else self.actions[idx]
        weights = None if self.weights is None else self.weights[idx]
        return PreferenceData(self.contexts[idx], self.differences[idx], self.labels[idx], actions,
                              weights=weights)

    def split(self, n_initial: int | None) -> tuple[PreferenceData, PreferenceData]:
        """Split into the first N₀ rows and the rest (the paper's data split).

        ``n_initial=None`` means no split: both parts are the whole data, as in the
        paper's main experiments.
        """
        if n_initial is None:
            return self, self
        n0 = check_int(n_initial, "n_initial", 1, self.n - 1)
        return self.subset(slice(0, n0)), self.subset(slice(n0, None))

    def to_frame(self) -> pd.DataFrame:
        """One row per comparison: ``x0..``, ``dphi0..``, ``y`` and, with weights, ``weight``."""
        cols = {f"x{j}": self.contexts[:, j] for j in range(self.d_x)}
        cols |= {f"dphi{j}": self.differences[:, j] for j in range(self.d_phi)}
        cols["y"] = self.labels
        if self.weights is not None:
            cols["weight"] = self.weights
        return pd.DataFrame(cols)


SCOPES = ("personalised", "global")


@dataclass(frozen=True, eq=False)
class Units:
    """The units a policy acts on: rows (x, s) for a personalised policy, states s for a global one.

    Attributes
    ----------
    of_row : ndarray of int, shape (n,)
        The unit of each population row.
    average : scipy.sparse.csr_array, shape (units, n)
        Row-averaging matrix: a unit's value is the mean over its rows.
    weights : ndarray, shape (units,)
        Each unit's share of the rows.
    """

    of_row: np.ndarray
    average: sparse.csr_array
    weights: np.ndarray

    @property
    def n(self) -> int:
        return self.weights.shape[0]

    def mean(self, values: np.ndarray) -> np.ndarray:
        """Per-unit means of per-row ``values`` (n, …) → (units, …); ``values`` itself when every row is its
        own unit (a personalised policy: no copy of the candidates' features, 2.5 GB at LLM width)."""
        if self.n == values.shape[0] and np.array_equal(self.of_row, np.arange(self.n)):
            return values
        flat = values.reshape(values.shape[0], -1)
        return (self.average @ flat).reshape(self.average.shape[0], *values.shape[1:])


@dataclass(frozen=True, eq=False)
class Population:
    """An evaluation population ρ: contexts, states and the candidate actions' features.

    Attributes
    ----------
    contexts : ndarray, shape (n, d_x)
        x_i.
    features : ndarray, shape (n, A, d_φ)
        φ(s_i, a) for every candidate action a = 0..A−1.
    states : ndarray of int, shape (n,)
        State id of each row; rows with the same id share s. A global policy π(s)
        acts per state and averages the reward over x | s within it.
    """

    contexts: np.ndarray
    features: np.ndarray
    states: np.ndarray

    def __post_init__(self):
        contexts = as_float_array(self.contexts, "contexts", 2)
        features = as_float_array(self.features, "features", 3)
        states = np.asarray(self.states)
        n = contexts.shape[0]
        if features.shape[0] != n:
            raise ValueError(f"contexts has {n} rows, features has {features.shape[0]}")
        if states.shape != (n,) or not np.issubdtype(states.dtype, np.integer):
            raise ValueError(f"states must be an integer array of shape ({n},), "
                             f"got {states.dtype} {states.shape}")
        _, states = np.unique(states, return_inverse=True)
        object.__setattr__(self, "contexts", contexts)
        object.__setattr__(self, "features", features)
        object.__setattr__(self, "states", states.astype(np.intp))

    @property
    def n(self) -> int:
        return self.contexts.shape[0]

    @property
    def n_actions(self) -> int:
        return self.features.shape[1]

    @functools.cached_property
    def fingerprint(self) -> str:
        """A hash of the population's arrays: a policy remembers which population it was solved on."""
        return fingerprint(self.contexts, self.features, self.states)

    @property
    def n_states(self) -> int:
        return int(self.states.max()) + 1

    @property
    def d_x(self) -> int:
        return self.contexts.shape[1]

    @property
    def d_phi(self) -> int:
        return self.features.shape[2]

    def units(self, scope: str) -> Units:
        """The units of a ``scope`` policy: every row (``"personalised"``) or every state (``"global"``)."""
        check_option(scope, "scope", SCOPES)
        of_row = np.arange(self.n) if scope == "personalised" else self.states
        n_units = int(of_row.max()) + 1
        counts = np.bincount(of_row, minlength=n_units).astype(float)
        average = sparse.csr_array((1.0 / counts[of_row], (of_row, np.arange(self.n))),
                                   shape=(n_units, self.n))
        return Units(of_row, average, counts / self.n)

    def __repr__(self) -> str:
        return (f"Population(n={self.n}, states={self.n_states}, actions={self.n_actions}, "
                f"d_x={self.d_x}, d_phi={self.d_phi})")


# True while a public fit that has already checked its data runs: the fits it calls stay quiet.
_DATA_CHECKED = contextvars.ContextVar("bayes_loco_data_checked", default=False)


def check_data(data, name: str = "data") -> PreferenceData:
    """``data`` as a :class:`PreferenceData` for a fit; a :class:`DataWarning` when its labels never vary.

    Labels all of one class are a valid encoding for the contextual BTL model,
    which has no intercept: (Δφ, y = 1) and (−Δφ, y = 0) are the same observation,
    so "features_1 always holds the preferred answer" gives the same fit as any
    random ordering. They are also what a wrong label column looks like, so say it,
    once per public call (see :func:`checks_data`).
    """
    if not isinstance(data, PreferenceData):
        raise TypeError(f"{name} must be a PreferenceData, got {type(data).__name__}")
    if not _DATA_CHECKED.get() and data.n > 1 and np.all(data.labels == data.labels[0]):
        if data.labels[0] == 0.5:
            warnings.warn(f"{name}.labels: all {data.n} comparisons are ties (y = 0.5): they say nothing "
                          "about which answer is preferred. Check the label column (ties='davidson' refuses "
                          "such data).", DataWarning, stacklevel=3)
            return data
        y = int(data.labels[0])
        warnings.warn(
            f"{name}.labels: all {data.n} comparisons have y = {y}. That is a valid encoding when "
            f"features_{y} always holds the preferred answer (the model has no intercept, so (Δφ, 1) and "
            "(−Δφ, 0) are the same observation); if the labels were meant to vary, check the label column.",
            DataWarning, stacklevel=3)
    return data


def _span_dimensions(data: PreferenceData, at_most: int) -> dict[str, int]:
    """The dimensions of the spans of the contexts and of the differences, each capped at ``at_most``."""
    return {"contexts": span_dimension(data.contexts, at_most),
            "differences": span_dimension(data.differences, at_most)}


def warn_unidentified_rank(data: PreferenceData, rank, name: str = "rank") -> None:
    """A :class:`DataWarning` when ``rank`` (an int, or a sequence of candidates) exceeds
    :meth:`PreferenceData.identified_rank`; a value that is no valid rank is left to the fit's check."""
    ranks = np.ravel(rank if isinstance(rank, range | list | tuple | np.ndarray) else [rank])
    valid = {int(r) for r in ranks if isinstance(r, numbers.Integral) and 1 <= r <= min(data.d_x, data.d_phi)}
    if not valid:
        return
    top = max(valid)
    dims = _span_dimensions(data, top)
    k = min(dims.values())
    if top <= k:
        return
    spans = " and ".join(f"the {what} span {dim}" for what, dim in dims.items() if dim == k)
    above = [str(r) for r in sorted(valid) if r > k]
    one = len(above) == 1
    which = ("" if name == "rank" else f"{name}: ") + ("rank " if one else "ranks ") + ", ".join(above)
    warnings.warn(
        f"{which} {'exceeds' if one else 'exceed'} the dimensions the data reach "
        f"({spans}): Θ is determined only on the spans of the contexts and of the differences, so at most "
        f"{k} components are fixed by the data and the rest by the prior, the penalty or the start alone. "
        f"Fit a rank of at most {k}.", DataWarning, stacklevel=3)


def checks_data(func):
    """Decorate a public function of ``data``: check it on entry, and keep the fits it calls quiet."""
    signature = inspect.signature(func)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        arguments = signature.bind_partial(*args, **kwargs).arguments
        data = check_data(arguments.get("data"))
        if not _DATA_CHECKED.get():
            for name in ("rank", "ranks"):
                warn_unidentified_rank(data, arguments.get(name), name)
        token = _DATA_CHECKED.set(True)
        try:
            return func(*args, **kwargs)
        finally:
            _DATA_CHECKED.reset(token)

    return wrapper
