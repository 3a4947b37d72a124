"""Decisions without a truth: which actions are statistically tied with the best, per unit.

An uncertainty set C says, for a unit u (a row (x, s) of a personalised population,
or a state s with the average over x | s for a global scope), that action b beats
action a for sure when min over θ ∈ C of [r_θ(b) − r_θ(a)] is > 0, with
r_θ(b) − r_θ(a) = θᵀ(z̄_ub − z̄_ua) (docs/design.md, convention 1). An action that no
other action beats for sure is *tied with the best*. If C holds the true θ*, the
true best action of every unit is among its tied ones: every statement is read
off the one set C, so all of them, over every action and unit, hold together
whenever θ* ∈ C — with probability at least C's level when C covers θ* at that
level. The pointwise sets (the posterior quantile, the CVaR set) make each
statement at their level separately instead (:attr:`BestActions.joint`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ._validation import LEVEL, check_level, check_option
from .config import get_config
from .design import population_coordinates
from .policy_inputs import check_set, feature_blocks, read_population
from .population import SCOPES, Population
from .results import Fit
from .sets.base import UncertaintySet, guarantee


@dataclass(frozen=True, eq=False)
class BestActions:
    """For every unit, the actions statistically tied with the best (:func:`best_actions`).

    Attributes
    ----------
    tied : ndarray of bool, shape (units, A)
        Whether action a is tied with the best in unit u: no action b has
        min over θ ∈ C of [r_θ(b) − r_θ(a)] > 0.
    margin : ndarray, shape (units, A)
        max over b ≠ a of min over θ ∈ C of [r_θ(b) − r_θ(a)]: how surely the best rival beats a
        (a is tied exactly where it is ≤ 0; −inf where no comparison identifies the
        difference, or with a single action).
    best : ndarray of int, shape (units,)
        The best action under the set's point estimate (an ellipsoid's centre, the
        mean of draws); for a set with neither, the pessimistic choice
        argmax over a of min over θ ∈ C of [r_θ(a) − r_θ(a_0)], which is always tied (if b beat it
        for every θ, b's worst case would be higher).
    unit_of_row : ndarray of int, shape (n,)
        The unit of each population row.
    scope : {"personalised", "global"}
    level : float or None
        The probability with which the statements hold (the set's level); None for a
        set with no level (the paper's C₂ penalty ball), whose statements are not
        calibrated.
    joint : bool
        True: all statements hold together (whenever θ* lies in the set). False: each
        exclusion holds at ``level`` on its own (a pointwise quantile or CVaR set).
    level_meaning : str
        In what sense ``level`` holds (:func:`~bayes_loco.sets.base.guarantee`).
    action_names : tuple of str
        A name for each action (their indices by default).
    """

    tied: np.ndarray
    margin: np.ndarray
    best: np.ndarray
    unit_of_row: np.ndarray
    scope: str
    level: float | None
    joint: bool
    level_meaning: str
    action_names: tuple[str, ...]

    def __post_init__(self):
        for name in ("tied", "margin", "best", "unit_of_row"):
            arr = np.array(getattr(self, name))
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    @property
    def n_units(self) -> int:
        return self.tied.shape[0]

    @property
    def n_actions(self) -> int:
        return self.tied.shape[1]

    @property
    def n_tied(self) -> np.ndarray:
        """How many actions are tied with the best in each unit, shape (units,)."""
        return self.tied.sum(axis=1)

    @property
    def row_tied(self) -> np.ndarray:
        """``tied`` for every population row, shape (n, A)."""
        return self.tied[self.unit_of_row]

    def to_frame(self) -> pd.DataFrame:
        """One row per unit: the point-estimate best action, how many are tied with the best, and which.

        Returns
        -------
        pandas.DataFrame
            ``row`` (personalised scope) or ``state`` (global), ``best`` (its name),
            ``n_tied``, ``tied_with_best`` (names) and ``tied_indices``.

        Examples
        --------
        >>> table = bl.best_actions(fit, pop, 0.9).to_frame()
        >>> list(table.columns), len(table)
        (['row', 'best', 'n_tied', 'tied_with_best', 'tied_indices'], 50)
        """
        names = np.asarray(self.action_names, dtype=object)
        return pd.DataFrame({
            "row" if self.scope == "personalised" else "state": np.arange(self.n_units),
            "best": names[self.best],
            "n_tied": self.n_tied,
            "tied_with_best": [list(names[row]) for row in self.tied],
            "tied_indices": [np.flatnonzero(row).tolist() for row in self.tied],
        })

    def __repr__(self) -> str:
        counts = self.n_tied
        if self.level is None:
            level = "no level: not calibrated"
        else:
            level = f"level={self.level:g}, {'simultaneous' if self.joint else 'each exclusion separately'}"
        return (f"BestActions(scope={self.scope!r}, units={self.n_units}, actions={self.n_actions}, {level}; "
                f"tied with the best per unit: mean {counts.mean():.3g}, min {counts.min()}, "
                f"max {counts.max()}; a single best action in {int((counts == 1).sum())} units)")


def best_actions(uncertainty_set: UncertaintySet | Fit, population: Population, level: float | None = None, *,
                 scope: str = "personalised", action_names: Sequence[str] | None = None) -> BestActions:
    """The actions statistically tied with the best in every unit of ``population``.

    Action a is excluded in unit u only if some action b beats it for every θ in
    the set C: min over θ ∈ C of θᵀ(z̄_ub − z̄_ua) > 0 (the set's ``lower_bound``, its
    support function from below). All the statements are read off the one set C,
    so when C covers θ* with probability ≥ ``level`` they hold simultaneously,
    over every action and unit, with probability ≥ ``level``: the true best action
    of every unit is then among its tied ones. For a pointwise set (the posterior
    quantile, a CVaR set) each exclusion holds at the level separately
    (``joint`` False); a set with no level (the paper's C₂ penalty ball) gives
    uncalibrated statements (``level`` None).

    Parameters
    ----------
    uncertainty_set : UncertaintySet or Fit
        Any set (:class:`~bayes_loco.EllipsoidSet` of any kind, held whole or as
        W's factor; :class:`~bayes_loco.DrawsSet`; :class:`~bayes_loco.QuantileSet`),
        or a fit, whose ``calibrated_set(level)`` is used (level 0.9 when None).
        An ellipsoid sized for policy values (``size_for_values``) is refused: it
        guards those values, not differences between actions.
    population : Population
        The units' contexts, states and candidate actions' features.
    level : float or None
        For a set: None takes the set's own level; a number must equal it (build
        the set at the level you want, e.g. ``fit.calibrated_set(level)``). For a
        fit: the level of its calibrated set.
    scope : {"personalised", "global"}
        Units are rows (x, s) or states s (rewards averaged over x | s).
    action_names : sequence of str, optional
        A name for each of the population's A actions, for :meth:`BestActions.to_frame`; for a fit
        on item-indexed data with A items, its item names by default.

    Returns
    -------
    BestActions
        ``best_actions(fit, population, 0.9, action_names=names).to_frame()`` is the
        table a person reads: per unit, the point-estimate best action, how many
        actions are tied with the best, and which.

    Examples
    --------
    >>> tied = bl.best_actions(fit.calibrated_set(0.9), pop)
    >>> tied.level, tied.joint, tied.tied.shape
    (0.9, True, (50, 4))
    >>> bool(tied.tied[np.arange(50), tied.best].all())     # the estimate's best is always tied
    True
    """
    check_option(scope, "scope", SCOPES)
    if not isinstance(population, Population):
        raise TypeError(f"population must be a Population, got {type(population).__name__}")
    if level is not None:
        level = check_level(level)
    if isinstance(uncertainty_set, Fit) and not isinstance(uncertainty_set, UncertaintySet):
        population = read_population(uncertainty_set, population)
        if action_names is None:  # the fit's item names, where the candidates are its items
            items = getattr(getattr(uncertainty_set, "data", None), "item_names", None)
            action_names = items if items is not None and len(items) == population.n_actions else None
        uncertainty_set = uncertainty_set.calibrated_set(LEVEL if level is None else level)
    check_set(uncertainty_set)
    population_coordinates(uncertainty_set, population)
    found = guarantee(uncertainty_set)
    if found.sized_for is not None:
        raise ValueError(f"uncertainty_set is sized for the values of {found.sized_for} policies "
                         "(size_for_values): it guards those values, not the differences between two "
                         "actions; pass the calibrated set it was sized from")
    if level is not None and (found.level is None or abs(level - found.level) > get_config()["level_atol"]):
        has = "no level" if found.level is None else f"level {found.level:g}"
        raise ValueError(f"level={level:g}, but the {found.kind!r} set has {has}: the statements are read "
                         "off the set, so build it at the level you want (fit.calibrated_set(level)) or "
                         "leave level None")
    names = _action_names(action_names, population.n_actions)
    units = population.units(scope)
    margin = np.empty((units.n, population.n_actions))
    best = np.empty(units.n, dtype=np.intp)
    center = _point_estimate(uncertainty_set)
    for lo, hi, z in feature_blocks(uncertainty_set, population, units, 0):
        margin[lo:hi] = _margins(uncertainty_set, z)
        scores = z @ center if center is not None else uncertainty_set.lower_bound(z)
        best[lo:hi] = scores.argmax(axis=1)
    return BestActions(margin <= 0.0, margin, best, units.of_row, scope, found.level, found.joint,
                       found.meaning, names)


def _margins(uncertainty_set: UncertaintySet, z: np.ndarray) -> np.ndarray:
    """max_{b ≠ a} min_{θ ∈ set} θᵀ(z_ub − z_ua) for units' mean candidate features z (units, A, k).

    One rival b at a time, for as many units as keep the differences z_ub − z_ua and a set's values of
    them (J per difference for a set of J draws) within ``config["feature_block_bytes"]``.
    """
    n_units, n_actions, k = z.shape
    draws = getattr(uncertainty_set, "draws", None)
    width = max(k, 0 if draws is None else np.shape(draws)[0])
    step = max(1, int(get_config()["feature_block_bytes"] // (8.0 * n_actions * width)))
    margin = np.full((n_units, n_actions), -np.inf)
    for lo in range(0, n_units, step):
        part = z[lo: lo + step]
        for b in range(n_actions):
            beats = uncertainty_set.lower_bound(part[:, b: b + 1, :] - part)
            beats[:, b] = -np.inf
            np.maximum(margin[lo: lo + step], beats, out=margin[lo: lo + step])
    return margin


def _point_estimate(uncertainty_set) -> np.ndarray | None:
    """θ̂ of a set: an ellipsoid's centre, the mean of draws; None for a set with neither."""
    center = getattr(uncertainty_set, "center", None)
    if center is not None:
        return np.asarray(center, dtype=float)
    draws = getattr(uncertainty_set, "draws", None)
    return None if draws is None else np.asarray(draws, dtype=float).mean(axis=0)


def _action_names(action_names, n_actions: int) -> tuple[str, ...]:
    if action_names is None:
        return tuple(str(a) for a in range(n_actions))
    if isinstance(action_names, str) or not isinstance(action_names, Sequence | np.ndarray):
        raise TypeError(f"action_names must be a sequence of {n_actions} str, got "
                        f"{type(action_names).__name__}")
    names = tuple(action_names)
    if len(names) != n_actions or not all(isinstance(name, str) for name in names):
        raise ValueError(f"action_names must name the population's {n_actions} actions with one str "
                         f"each, got {len(names)} names")
    if len(set(names)) != n_actions:
        raise ValueError("action_names must be distinct: "
                         f"{sorted({name for name in names if names.count(name) > 1})} repeat")
    return names
