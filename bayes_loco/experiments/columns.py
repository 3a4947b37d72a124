"""The columns of a study's rows, those a study may add (:attr:`~bayes_loco.experiments.Study.columns`),
and :func:`~bayes_loco.experiments.compare_policies`' table.

Each added column is a function (policy, set, population, Θ*) → value, evaluated for every row of
:func:`~bayes_loco.experiments.run_methods`; the studies that do not ask for them keep the rows of
:data:`~bayes_loco.experiments.COLUMNS` only.
"""

from __future__ import annotations

import html
import textwrap
from collections.abc import Callable

import numpy as np
import pandas as pd

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


#: The columns of every row of a study's results, in order.
COLUMNS = ["method", "fit", "set_kind", "level", "objective", "scope", "suboptimality", "pessimistic_value",
           "relative_gap", "covered", "value_covered", "truth_distance", "radius", "k_eff", "c_star",
           "theta_error", "fit_seconds", "policy_seconds", "selected_rank", "max_rhat", "divergences",
           "chart_rank"]


# compare_policies' table: what a reader compares first (the policy's sub-optimality and pessimistic
# value, whether the set covered θ* and the value), then the rest of COLUMNS in their order.
SHOWN_COLUMNS = ("method", "suboptimality", "pessimistic_value", "covered", "value_covered")
COMPARE_COLUMNS = [*SHOWN_COLUMNS, *(c for c in COLUMNS if c not in SHOWN_COLUMNS)]


class PolicyTable(pd.DataFrame):
    """:func:`compare_policies`' table: a pandas DataFrame that displays its key columns.

    Every column is there (``table.columns``, ``table["radius"]``,
    ``table.to_string()``, ``table.to_csv()``, ``pd.DataFrame(table)``); printed,
    or rendered in a notebook, it shows :data:`SHOWN_COLUMNS` and names the
    others, so that its 22 columns neither wrap nor hide sub-optimality. What is
    derived from it (a selection, ``set_index``, …) is a plain DataFrame.
    """

    @property
    def _constructor(self):
        return pd.DataFrame

    def _shown(self) -> pd.DataFrame:
        return pd.DataFrame(self)[[c for c in SHOWN_COLUMNS if c in self.columns]]

    def _others(self) -> str:
        others = [c for c in self.columns if c not in SHOWN_COLUMNS]
        return (f"{len(others)} more columns (table[name], table.to_string()): {', '.join(others)}"
                if others else "")

    def __repr__(self) -> str:
        others = self._others()
        # Wrapped to pandas' own width, as the table above it is.
        width = pd.get_option("display.width") or 80
        return repr(self._shown()) + (f"\n{textwrap.fill(f'[{others}]', width)}" if others else "")

    def _repr_html_(self) -> str:
        others = self._others()
        return self._shown()._repr_html_() + (f"<p>{html.escape(others)}</p>" if others else "")
