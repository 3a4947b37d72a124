"""The evaluation population ρ a policy acts on: contexts, states, candidate actions, and their units."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from ._validation import as_float_array, check_option, fingerprint

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
        """The units of a ``scope`` policy: every row (``"personalised"``) or every state (``"global"``).

        Parameters
        ----------
        scope : {"personalised", "global"}

        Returns
        -------
        Units
            Each row's unit, the row-averaging matrix and each unit's share of the rows.

        Examples
        --------
        >>> two = bl.Population(np.ones((4, 1)), np.zeros((4, 2, 3)), np.array([0, 0, 1, 1]))
        >>> two.units("global").n, two.units("global").weights, two.units("personalised").n
        (2, array([0.5, 0.5]), 4)
        """
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
