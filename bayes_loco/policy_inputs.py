"""What a policy and a decision read of a population under a set: the fit's view, the set, the features.

:mod:`bayes_loco.policy` and :mod:`bayes_loco.decisions` share these: the population as a fit reads it,
the check of the set and of a policy's probabilities, and the units' candidate features made a block at
a time.
"""

from __future__ import annotations

import numpy as np

from ._validation import as_float_array
from .config import get_config
from .design import population_coordinates, relative_features
from .population import Population, Units
from .sets.base import FeatureBlocks, UncertaintySet


def read_population(fit, population: Population) -> Population:
    """``population`` as ``fit`` reads it: a fit with its own view of populations (plain Bradley–Terry
    reads every user with x ≡ 1: ``fit.population``) gets that view, others the population itself."""
    view = getattr(fit, "population", None)
    return view(population) if callable(view) else population


def check_set(uncertainty_set) -> UncertaintySet:
    """``uncertainty_set`` if it has the set protocol (``coordinates``, ``lower_bound(z)``), or one error."""
    if not isinstance(uncertainty_set, UncertaintySet):
        raise TypeError("uncertainty_set must have `coordinates` and `lower_bound(z)`, "
                        f"got {type(uncertainty_set).__name__}")
    return uncertainty_set


def feature_blocks(uncertainty_set: UncertaintySet, population: Population, units: Units,
                   reference_action: int) -> FeatureBlocks:
    """The units' mean candidate features, ``config["feature_block_bytes"]`` of rows' features at a time."""
    coordinates = population_coordinates(uncertainty_set, population)
    n_actions, k = population.n_actions, coordinates.dim
    own_rows = units.n == population.n and np.array_equal(units.of_row, np.arange(units.n))
    size = get_config()["feature_block_bytes"]
    per_block = max(1, int(size * units.n / (8.0 * n_actions * k * population.n)))

    def make(lo, hi):
        part = units.average[lo:hi]
        rows = np.arange(lo, hi) if own_rows else np.unique(part.indices)
        z = relative_features(coordinates, population.contexts[rows], population.features[rows],
                              reference_action)
        return z if own_rows else (part[:, rows] @ z.reshape(rows.size, -1)).reshape(hi - lo, n_actions, k)

    return FeatureBlocks((units.n, n_actions, k), make, per_block)


def check_probabilities(probabilities, name: str, shape: tuple[int, int] | None = None) -> np.ndarray:
    """``probabilities`` as a float array of rows on the simplex (to ``config["simplex_atol"]``), or one
    error.

    ``shape`` (units, A), when given, is the shape they must have.
    """
    probabilities = as_float_array(probabilities, name, 2)
    if shape is not None and probabilities.shape != shape:
        raise ValueError(f"{name} must have shape {shape} (units x actions), got {probabilities.shape}")
    negative = probabilities < -get_config()["simplex_atol"]
    if negative.any():
        i, a = np.argwhere(negative)[0]
        raise ValueError(f"{name}[{i}, {a}] = {probabilities[i, a]:.6g} is negative; each row must be a "
                         "probability distribution over the actions")
    sums = probabilities.sum(axis=1)
    off = np.abs(sums - 1.0) > get_config()["simplex_atol"]
    if off.any():
        i = int(np.flatnonzero(off)[0])
        raise ValueError(f"{name}: row {i} sums to {sums[i]:.6g}, not 1; each row must be a probability "
                         "distribution over the actions (divide by its row sums)")
    return probabilities
