"""Columns a study may add to its rows (:attr:`~bayes_loco.experiments.Study.columns`).

Each is a function (policy, set, population, Θ*) → value, evaluated for every row of
:func:`~bayes_loco.experiments.run_methods`; the studies that do not ask for them keep the rows of
:data:`~bayes_loco.experiments.COLUMNS` only.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..evaluate import relative_value, truth_rewards
from ..sets import ValueFamilySet


def _family_covered(policy, uset, population, theta_star) -> float:
    if theta_star is None or not isinstance(uset, ValueFamilySet) or uset.level is None:
        return np.nan
    rewards = truth_rewards(theta_star, population)
    return float(uset.covers(rewards - rewards[:, [uset.reference_action]]))


#: The extra columns by name, each (policy, set, population, Θ*) → value.
EXTRA_COLUMNS: dict[str, Callable] = {
    # The policy's true value relative to always playing the reference action.
    "improvement": lambda policy, uset, population, theta_star: (
        np.nan if theta_star is None else relative_value(policy, theta_star, population)),
    # The share of population rows whose (most probable) action is the reference.
    "reference_share": lambda policy, uset, population, theta_star: float(
        np.mean(policy.actions == policy.reference_action)),
    # A value family's coverage of the true values x (Θ* φ(s, a) − Θ* φ(s, a_ref)) of its population
    # (``covered`` is of θ*_rtv's values, which leave out Θ*'s component outside the reduced subspace).
    "family_covered": _family_covered,
    "bonferroni": lambda policy, uset, population, theta_star: (
        uset.bonferroni if isinstance(uset, ValueFamilySet) else np.nan),
    "critical_error": lambda policy, uset, population, theta_star: (
        uset.critical_error if isinstance(uset, ValueFamilySet) else np.nan),
    "members": lambda policy, uset, population, theta_star: (
        float(uset.members) if isinstance(uset, ValueFamilySet) else np.nan),
}
