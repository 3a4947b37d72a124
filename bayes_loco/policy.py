"""The one pessimistic policy solver that every uncertainty set feeds.

Actions are scored relative to a reference action a_ref (docs/design.md, convention 1):
z(x, s, a) is the set's coordinate map applied to φ(s, a) − φ(s, a_ref), so the
reference scores 0 under every θ and the state features that no comparison
identifies cancel.

Two objectives:

``"relaxed"`` (the paper's appendix)
    Pessimism pointwise: each (x, s) — or, for a global policy, each s with the
    average over x | s — picks argmax_a min_(θ ∈ set) θᵀz, a different worst-case
    θ for every unit. For an ellipsoid that is θ̂ᵀz − C‖z‖_W⁻¹.
``"exact"``
    max_π min_(θ ∈ set) θᵀ m(π), m(π) = E_ρ Σ_a π(a) z: one worst case for the
    whole policy. By minimax duality over stochastic policies and a convex
    compact set this equals min_(θ ∈ set) V(θ), V(θ) = E_ρ max_a θᵀz (personalised)
    or E_s max_a E_x|s θᵀz (global), a k-dimensional convex problem. The policy
    is greedy under the minimiser, mixed over ties, and comes with a certificate:
    V at the returned θ bounds the optimum from above, the policy's own
    pessimistic value from below.

Either way a policy's ``pessimistic_value`` L is a lower bound on its true value
relative to always playing a_ref, holding whenever θ* lies in the set: with
probability ≥ the set's level (``Policy.level``; None for the paper's C₂ penalty
ball, whose bound is not calibrated). :meth:`Policy.bound` states it in words.

A value family (:class:`~bayes_loco.sets.ValueFamilySet`, a :class:`~bayes_loco.sets.FamilySet`)
bounds only the population's row × action values, all at once: the relaxed objective reads
its bounds, and L is the weighted sum of the chosen actions' bounds, which holds whenever
every member's value lies in its interval. Its bounds form a box in those values, over which
the exact objective's minimax decouples into the relaxed one, so only the relaxed objective
takes it.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from ._domains import is_real
from ._validation import LEVEL, as_float_array, check_int, check_level, check_option, check_real
from .config import get_config
from .design import candidate_features, mean_candidate_features
from .exceptions import ConvergenceWarning
from .model import rewards
from .policy_inputs import check_probabilities, check_set, feature_blocks, read_population
from .population import SCOPES, Population, Units
from .results import Fit
from .sets.base import (
    Certificate,
    ConvexSet,
    ExactProblem,
    FamilySet,
    NashSet,
    PolicyStatus,
    UncertaintySet,
    guarantee,
    reads_feature_blocks,
)
from .solvers import SOLVERS

OBJECTIVES = ("relaxed", "exact")
POLICY_OBJECTIVES = ("greedy", *OBJECTIVES)
WELFARES = ("utilitarian", "nash")


@dataclass(frozen=True, eq=False)
class Policy:
    """A (possibly stochastic) policy over a population.

    Attributes
    ----------
    probabilities : ndarray, shape (n_units, A)
        π(a | unit); a unit is a row (x, s) for a personalised policy and a state
        for a global one.
    unit_of_row : ndarray of int, shape (n,)
        Unit of each population row.
    scope : {"personalised", "global"}
    objective : {"greedy", "relaxed", "exact"}
    reference_action : int
    pessimistic_value : float
        L = min_(θ ∈ set) θᵀ m(π): the policy's worst-case value over the set,
        relative to always playing the reference action (NaN for greedy). With
        probability ≥ ``level`` the policy's true value relative to always playing
        a_ref is at least L (:meth:`bound` says it in words).
    objective_value : float
        The value of the objective that was maximised (relaxed: the mean of
        pointwise lower bounds; exact: equals ``pessimistic_value``; Nash welfare:
        the guaranteed Σ_i w_i log(reward_i − r₀)).
    welfare : {"utilitarian", "nash"}
    theta : ndarray or None
        Exact objective: the minimising θ (set coordinates); the policy is greedy
        under it, which is how it acts on contexts outside the population.
    certificate : Certificate or None
        Exact objective: bounds on the optimal pessimistic value.
    rounded_value : float or None
        Exact objective: the pessimistic value of the deterministic policy that
        plays each unit's most probable action; ``pessimistic_value −
        rounded_value`` is what rounding loses.
    status : PolicyStatus
    message : str
    population : str or None
        The fingerprint of the population it was solved on (:attr:`Population.fingerprint`);
        evaluation refuses another population. None: not recorded (a hand-built policy).
    level : float or None
        The probability with which ``pessimistic_value`` bounds the policy's value relative to
        a_ref: the set's level. None where no level backs it: a greedy or hand-built policy, a
        set with no level (the paper's C₂ penalty ball, kind ``"gram"``), or an ellipsoid sized
        for another scope's values. (Policies saved before this field load with None.)
    level_meaning : str or None
        In what sense ``level`` holds, or why there is none
        (:func:`~bayes_loco.sets.base.guarantee`); None for a greedy or hand-built policy.
    """

    probabilities: np.ndarray
    unit_of_row: np.ndarray
    scope: str
    objective: str
    reference_action: int
    pessimistic_value: float
    objective_value: float
    welfare: str = "utilitarian"
    theta: np.ndarray | None = None
    certificate: Certificate | None = None
    rounded_value: float | None = None
    status: PolicyStatus = PolicyStatus.SOLVED
    message: str = ""
    population: str | None = None
    level: float | None = None
    level_meaning: str | None = None

    def __post_init__(self):
        probabilities = check_probabilities(self.probabilities, "probabilities")
        units, n_actions = probabilities.shape
        unit_of_row = np.asarray(self.unit_of_row)
        if unit_of_row.ndim != 1 or unit_of_row.size == 0 or unit_of_row.dtype.kind not in "iu":
            raise ValueError(f"unit_of_row must be a non-empty 1-d integer array, got {unit_of_row.dtype} "
                             f"{unit_of_row.shape}")
        if unit_of_row.min() < 0 or unit_of_row.max() >= units:
            bad = int(unit_of_row[(unit_of_row < 0) | (unit_of_row >= units)][0])
            raise ValueError(f"unit_of_row must index the {units} rows of probabilities (0 .. {units - 1}), "
                             f"got {bad}")
        check_option(self.scope, "scope", SCOPES)
        check_option(self.objective, "objective", POLICY_OBJECTIVES)
        check_option(self.welfare, "welfare", WELFARES)
        check_int(self.reference_action, "reference_action", 0, n_actions - 1)
        for name in ("pessimistic_value", "objective_value", "rounded_value"):
            value = getattr(self, name)
            if value is None and name == "rounded_value":
                continue
            if not is_real(value):
                raise TypeError(f"{name} must be a real number, got {value!r}")
            # A greedy policy has no set, so no pessimistic value; a hand-built one may have no objective.
            if np.isnan(value) and not (self.objective == "greedy" and name != "rounded_value"):
                raise ValueError(f"{name} is NaN; only a greedy policy may leave its values NaN")
        if self.theta is not None:
            object.__setattr__(self, "theta", as_float_array(self.theta, "theta", 1))
        if self.certificate is not None and not isinstance(self.certificate, Certificate):
            raise TypeError("certificate must be a Certificate or None, got "
                            f"{type(self.certificate).__name__}")
        if not isinstance(self.status, PolicyStatus):
            raise TypeError(f"status must be a PolicyStatus, got {self.status!r}")
        if self.population is not None and not isinstance(self.population, str):
            raise TypeError(f"population must be a population's fingerprint (str) or None, got "
                            f"{type(self.population).__name__}")
        check_level(self.level, allow_none=True)
        if self.level_meaning is not None and not isinstance(self.level_meaning, str):
            raise TypeError(f"level_meaning must be a str or None, got {type(self.level_meaning).__name__}")
        for name, arr in (("probabilities", probabilities), ("unit_of_row", unit_of_row)):
            if arr is getattr(self, name) and arr.flags.writeable:
                arr = arr.copy()  # never freeze the caller's array
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)

    @property
    def row_probabilities(self) -> np.ndarray:
        """π(a | x_i, s_i) for every population row, shape (n, A)."""
        return self.probabilities[self.unit_of_row]

    @property
    def actions(self) -> np.ndarray:
        """The most probable action of every population row."""
        return self.row_probabilities.argmax(axis=1)

    @property
    def n_mixed(self) -> int:
        """Units whose action is random (largest probability below 1 − 1e-9)."""
        return int((self.probabilities.max(axis=1) < 1 - 1e-9).sum())

    def bound(self) -> ValueBound:
        """The policy's guarantee: its value relative to always playing a_ref is at least
        ``pessimistic_value``, with probability ≥ ``level`` (``str()`` of it says so in words).

        Returns
        -------
        ValueBound
            ``lower`` (the pessimistic value), ``level`` (None where no probability
            backs it, e.g. the paper's penalty set) and ``reference_action``.

        Examples
        --------
        >>> policy = bl.pessimistic_policy(fit.calibrated_set(0.9), pop, objective="exact")
        >>> print(policy.bound())  # doctest: +ELLIPSIS
        With probability >= 0.9 ... the reference action a_ref = 0 is at least 0.20...
        """
        return ValueBound(self.pessimistic_value, self.level, self.reference_action, self.level_meaning)

    def __repr__(self) -> str:
        cert = "" if self.certificate is None else f", relative gap={self.certificate.relative_gap:.2e}"
        level = "no level" if self.level is None else f"level={self.level:g}"
        return (f"Policy(scope={self.scope!r}, objective={self.objective!r}, "
                f"units={len(self.probabilities)}, "
                f"mixed={self.n_mixed}, pessimistic_value={self.pessimistic_value:.4g} ({level}){cert}, "
                f"status={self.status.value})")


@dataclass(frozen=True)
class ValueBound:
    """A policy's pessimistic value read as a lower bound on its value relative to the reference action.

    With probability ≥ ``level``, V(π) − V(a_ref) ≥ ``lower``, where V(π) = E_ρ Σ_a π(a) r*(x, s, a)
    is the true value and V(a_ref) that of always playing a_ref. A ``level`` of None: ``lower`` is
    the worst case over a set that no probability backs (not a calibrated bound), or, NaN, no bound
    at all (a greedy policy). ``meaning`` says in what sense the level holds.
    """

    lower: float
    level: float | None
    reference_action: int
    meaning: str | None = None

    @property
    def calibrated(self) -> bool:
        """Whether a probability backs the bound."""
        return self.level is not None and not np.isnan(self.lower)

    def __str__(self) -> str:
        relative = (f"the value of this policy relative to always choosing the reference action "
                    f"a_ref = {self.reference_action}")
        if np.isnan(self.lower):
            return f"no bound on {relative}: a greedy policy has no uncertainty set"
        if self.level is None:
            why = self.meaning or "no level recorded"
            return (f"{relative[0].upper()}{relative[1:]} is at least {self.lower:.6g} for every θ in the "
                    f"set it was solved under; this is not a calibrated bound ({why})")
        why = f" ({self.meaning})" if self.meaning else ""
        return f"With probability >= {self.level:g}{why}, {relative} is at least {self.lower:.6g}"

    def __repr__(self) -> str:
        return f"ValueBound({self})"


def _check_common(population, scope, reference_action):
    if not isinstance(population, Population):
        raise TypeError(f"population must be a Population, got {type(population).__name__}")
    check_option(scope, "scope", SCOPES)
    return check_int(reference_action, "reference_action", 0, population.n_actions - 1)


def greedy_policy(theta: np.ndarray, population: Population, *, scope: str = "personalised") -> Policy:
    """argmax_a of the estimated reward xᵀΘ̂φ(s, a) (averaged over x | s for ``scope="global"``).

    MLE-Greedy is ``greedy_policy(fit_mle(data).theta, population)``.

    Parameters
    ----------
    theta : ndarray of shape (d_x, d_φ)
        Θ̂, e.g. ``fit.theta`` of any fit.
    population : Population
        The units to choose an action for, with every candidate action's features.
    scope : {"personalised", "global"}
        One action per row (x, s), or per state s for the rows that share it.

    Returns
    -------
    Policy
        Deterministic (a tie goes to the action of lowest index), with no pessimistic value (NaN) and no
        level.

    Examples
    --------
    >>> greedy = bl.greedy_policy(fit.theta, pop)
    >>> greedy.probabilities.shape               # one row per unit, one column per action
    (50, 4)
    >>> round(bl.suboptimality(greedy, problem, pop), 3)
    0.063
    """
    _check_common(population, scope, 0)
    if hasattr(theta, "theta") and hasattr(theta, "coordinates"):
        raise TypeError(f"theta must be an estimate Θ̂ (d_x x d_phi array), got a {type(theta).__name__} (a "
                        "fit): pass its theta (greedy_policy(fit.theta, population)), or use "
                        "pessimistic_policy(fit.penalty_set(), population) for a pessimistic policy")
    theta = as_float_array(theta, "theta", 2)
    if theta.shape != (population.d_x, population.d_phi):
        raise ValueError(f"theta has shape {theta.shape}, the population needs "
                         f"({population.d_x}, {population.d_phi})")
    units = population.units(scope)
    scores = units.mean(rewards(theta, population.contexts, population.features))
    probs = np.eye(population.n_actions)[scores.argmax(axis=1)]
    value = float(units.weights @ scores.max(axis=1))
    return Policy(probs, units.of_row, scope, "greedy", 0, np.nan, value, population=population.fingerprint)


def _exact_problem(uncertainty_set, population, units: Units, reference_action, tol=1e-4,
                   max_iter=60, solver: str = "auto") -> ExactProblem:
    size = 8.0 * population.n * population.n_actions * uncertainty_set.coordinates.dim
    if reads_feature_blocks(uncertainty_set) and size > 2 * get_config()["feature_block_bytes"]:
        return ExactProblem(feature_blocks(uncertainty_set, population, units, reference_action),
                            units.weights, tol, max_iter, SOLVERS[solver])
    return ExactProblem(mean_candidate_features(uncertainty_set, population, units, reference_action),
                        units.weights, tol, max_iter, SOLVERS[solver])


def pessimistic_value(uncertainty_set: UncertaintySet, population: Population, probabilities: np.ndarray,
                      *, scope: str = "personalised", reference_action: int = 0) -> float:
    """min over θ in the set of θᵀ m(π), m(π) = E_ρ Σ_a π(a) z: a policy's worst case over the set.

    Parameters
    ----------
    uncertainty_set : UncertaintySet
    population : Population
    probabilities : ndarray of shape (units, A)
        π: one row per unit (row or state, as ``scope`` says), summing to 1.
    scope : {"personalised", "global"}
    reference_action : int
        a_ref; values are relative to always playing it.

    Returns
    -------
    float
        The worst-case value relative to a_ref (−∞ where π moves along a direction the
        set leaves unbounded).

    Examples
    --------
    >>> policy = bl.pessimistic_policy(fit.calibrated_set(0.9), pop, objective="exact")
    >>> value = bl.pessimistic_value(fit.calibrated_set(0.9), pop, policy.probabilities)
    >>> bool(np.isclose(value, policy.pessimistic_value, rtol=1e-3))
    True
    """
    reference_action = _check_common(population, scope, reference_action)
    check_set(uncertainty_set)
    units = population.units(scope)
    probabilities = check_probabilities(probabilities, "probabilities", (units.n, population.n_actions))
    if isinstance(uncertainty_set, FamilySet):
        scores = units.mean(_row_bounds(uncertainty_set, population, reference_action))
        return float(units.weights @ np.sum(probabilities * scores, axis=1))
    problem = _exact_problem(uncertainty_set, population, units, reference_action)
    return problem.worst_case(uncertainty_set, probabilities)


def pessimistic_policy(uncertainty_set: UncertaintySet, population: Population, *,
                       objective: str = "relaxed", scope: str = "personalised",
                       reference_action: int = 0, welfare: str = "utilitarian", floor: float = -1.0,
                       tol: float = 1e-4, max_iter: int = 60, solver: str = "auto") -> Policy:
    """The pessimistic policy of ``population`` under ``uncertainty_set``.

    Parameters
    ----------
    uncertainty_set : UncertaintySet or Fit
        Any set with ``coordinates`` and ``lower_bound`` (PRS's ellipsoid, the
        MLE baselines' ellipsoids, Wald sets, posterior credible sets), or a fit, whose
        ``calibrated_set(0.9)`` is used (a plain Bradley–Terry fit reads the population
        with x ≡ 1).
    population : Population
        The evaluation population ρ with every candidate action's features.
    objective : {"relaxed", "exact"}
        ``"relaxed"`` (the paper's): each unit picks argmax_a of min over the set of
        θᵀz, a separate worst case per unit (for an ellipsoid θ̂ᵀz − C‖z‖_W⁻¹).
        ``"exact"``: max over π of min over the set of θᵀm(π), one worst case for the
        whole policy, solved through its dual min over the set of V(θ),
        V(θ) = E_ρ max_a θᵀz, and certified by ``policy.certificate`` (docs/design.md,
        "The exact objective"). It needs a convex set, one that implements
        ``solve_exact`` (:class:`~bayes_loco.sets.ConvexSet`): an ``EllipsoidSet``
        or a ``DrawsSet`` (the hull of draws), or a kind of your own. With a
        calibrated set use ``"exact"``: the relaxed objective then falls back to
        the reference action almost everywhere.
    scope : {"personalised", "global"}
        π(x, s) per row, or π(s) per state (rows sharing ``population.states``).
    reference_action : int
        a_ref: rewards are compared with this action's (default 0, the paper's
        baseline answer). It never has a worse worst case than itself, so every
        pessimistic policy's ``pessimistic_value`` is ≥ 0.
    welfare : {"utilitarian", "nash"}
        Utilitarian (default) maximises the mean reward. Nash maximises the mean of
        log(reward − r₀) (reward relative to the reference action), which favours
        units with low rewards. Minimax duality fails for a concave utility, so:
        with ``objective="relaxed"`` each unit maximises its own lower bound, which
        guarantees Σ_i w_i log(lower bound_i − r₀) whenever the true θ lies in the
        set; ``objective="exact"`` needs a set with an exact Nash program
        (``solve_nash``: the hull of draws, an exponential-cone solve whose welfare,
        guaranteed at every draw, holds over the whole hull because it is concave
        in θ) and is refused for other sets.
    floor : float
        r₀ < 0 for Nash welfare (the reference action scores 0).
    tol : float
        Exact objective: target relative gap of the certificate.
    max_iter : int
        Exact objective: iterations per inner solve.
    solver : {"auto", "newton", "first-order"}
        Exact objective of an ellipsoid: the solver of its reduced minimax, by its name in
        :data:`bayes_loco.solvers.SOLVERS` (``"auto"``: smoothed Newton up to
        ``config["newton_max"]`` identified directions, first-order methods above).

    Returns
    -------
    Policy
        ``probabilities`` (one row per unit), ``pessimistic_value`` (a lower bound on the
        value relative to a_ref whenever the truth is in the set), ``level`` and
        ``bound()``, the exact objective's ``certificate`` and ``theta``.

    Raises
    ------
    ValueError
        A set of other coordinates than the population's, an unknown objective, scope
        or welfare, ``"exact"`` with a set that has no exact solver.

    Examples
    --------
    >>> paper = bl.pessimistic_policy(fit.penalty_set(c2=5.0), pop)               # the paper's PRS
    >>> exact = bl.pessimistic_policy(fit.calibrated_set(0.9), pop, objective="exact")
    >>> exact.certificate.relative_gap < 1e-4                                     # certified
    True
    >>> round(bl.suboptimality(paper, problem, pop), 3), round(bl.suboptimality(exact, problem, pop), 3)
    (0.064, 0.057)

    The exact solve takes about 2 s for 2,000 units × 10 actions in 138 coordinates, and
    grows linearly in the units.
    """
    if isinstance(uncertainty_set, Fit) and not isinstance(uncertainty_set, UncertaintySet):
        population = read_population(uncertainty_set, population)
        uncertainty_set = uncertainty_set.calibrated_set(LEVEL)
    reference_action = _check_common(population, scope, reference_action)
    check_option(objective, "objective", OBJECTIVES)
    tol = check_real(tol, "tol", 0.0, low_open=True)
    max_iter = check_int(max_iter, "max_iter", 1)
    check_option(solver, "solver", tuple(SOLVERS))
    check_option(welfare, "welfare", WELFARES)
    floor = check_real(floor, "floor", high=0.0, high_open=True)
    check_set(uncertainty_set)
    units = population.units(scope)
    common = dict(unit_of_row=units.of_row, scope=scope, reference_action=reference_action, welfare=welfare,
                  population=population.fingerprint,
                  **_bound_level(uncertainty_set, scope, population, reference_action))
    if objective == "relaxed":
        return _relaxed(uncertainty_set, population, units, reference_action, welfare, floor, common)
    if isinstance(uncertainty_set, FamilySet):
        raise TypeError(f"objective='exact' does not take a {type(uncertainty_set).__name__}: its bounds "
                        "hold value by value, a box in the population's row x action values, and over a box "
                        "the exact objective's minimax is the relaxed objective's per-unit choice. Use "
                        "objective='relaxed'.")
    if not isinstance(uncertainty_set, ConvexSet):
        raise TypeError("objective='exact' needs a convex set that implements solve_exact(problem): an "
                        "EllipsoidSet (kinds gram, wald, credible, sandwich) or a DrawsSet (the convex hull "
                        f"of draws); got {type(uncertainty_set).__name__}, which has no exact solver. Use "
                        "objective='relaxed' for it.")
    problem = _exact_problem(uncertainty_set, population, units, reference_action, tol, max_iter, solver)
    if welfare == "nash":
        return _exact_nash(uncertainty_set, problem, floor, common)
    solution = uncertainty_set.solve_exact(problem)
    if solution.status is PolicyStatus.GAP_NOT_REACHED:
        warnings.warn(f"pessimistic_policy: {solution.message}", ConvergenceWarning, stacklevel=2)
    rounded = np.eye(population.n_actions)[solution.probabilities.argmax(axis=1)]
    return Policy(solution.probabilities, objective="exact",
                  pessimistic_value=solution.certificate.lower,
                  objective_value=solution.certificate.lower, theta=solution.theta,
                  certificate=solution.certificate,
                  rounded_value=(problem.worst_case(uncertainty_set, rounded)
                                 if solution.rounded_value is None else solution.rounded_value),
                  status=solution.status, message=solution.message, **common)


def best_bound_policy(policies: Sequence[Policy]) -> Policy:
    """Of policies solved under several calibrated sets, the one with the largest bound, at their joint level.

    If set j covers the truth with probability ≥ level_j, all of them do with probability
    ≥ 1 − Σ_j (1 − level_j) (Bonferroni over the sets), and on that event every policy's bound
    holds at once, so the largest does too: choosing after seeing the bounds costs nothing beyond
    the union. Solve each policy at level 1 − α/m to keep 1 − α overall. The usual pair: the exact
    policy under the Wald set (best at small width, where the set is tight) and the value family's
    (best at a reward model's width, where the Wald set guards thousands of unused directions).

    Parameters
    ----------
    policies : sequence of Policy
        Each with a calibrated bound (``level`` not None), all of one population, scope and
        reference action.

    Returns
    -------
    Policy
        The policy with the largest ``pessimistic_value``; its ``level`` is the joint one and its
        ``level_meaning`` says which policy was kept and why the level is lower.

    Raises
    ------
    ValueError
        Fewer than two policies, one without a level, or policies of different populations, scopes
        or reference actions; a joint level ≤ 0.

    Examples
    --------
    >>> half = 1 - (1 - 0.9) / 2                     # each set at 0.95: 0.9 for the pair
    >>> exact = bl.pessimistic_policy(fit.calibrated_set(half), pop, objective="exact")
    >>> family = bl.pessimistic_policy(fit.calibrated_set(half, "family", population=pop), pop)
    >>> best = bl.best_bound_policy([exact, family])
    >>> round(best.level, 2), best.pessimistic_value == max(exact.pessimistic_value, family.pessimistic_value)
    (0.9, True)
    """
    policies = list(policies)
    if len(policies) < 2 or not all(isinstance(p, Policy) for p in policies):
        raise ValueError(f"policies must be two or more Policy objects, got {len(policies)} "
                         f"({', '.join(sorted({type(p).__name__ for p in policies}))})")
    missing = [i for i, p in enumerate(policies) if p.level is None]
    if missing:
        raise ValueError(f"policies {missing} have no level (greedy, the paper's penalty set or a set sized "
                         "for another scope): a union bound needs every policy's bound calibrated")
    for name in ("population", "scope", "reference_action"):
        values = {getattr(p, name) for p in policies}
        if len(values) > 1:
            raise ValueError(f"policies differ in {name} ({sorted(map(str, values))}): their bounds are not "
                             "bounds on one value")
    level = 1.0 - sum(1.0 - p.level for p in policies)
    if level <= 0:
        raise ValueError(f"policies: the joint level 1 - sum(1 - level) = {level:.3g} is not positive; solve "
                         "each at 1 - alpha/m")
    best = max(range(len(policies)), key=lambda i: policies[i].pessimistic_value)
    kept = policies[best]
    meaning = (f"the largest of {len(policies)} bounds, each at its own level (kept: #{best}, "
               f"{kept.objective} objective, level {kept.level:g}); union bound over the sets")
    return replace(kept, level=level, level_meaning=meaning)


def _bound_level(uncertainty_set, scope: str, population: Population, reference_action: int) -> dict:
    """The ``level`` and ``level_meaning`` of a ``scope`` policy's pessimistic value under the set."""
    found = guarantee(uncertainty_set)
    if found.sized_for not in (None, scope):
        return dict(level=None, level_meaning=f"the {found.kind} set is sized for the values of "
                    f"{found.sized_for} policies, so it gives no level for a {scope} policy's value")
    if isinstance(uncertainty_set, FamilySet) and (
            uncertainty_set.family_lower(population, reference_action) is None):
        return dict(level=None, level_meaning="the value family was fixed on another population or reference "
                    "action, so its simultaneous guarantee does not cover this population's values")
    return dict(level=None if found.level is None else float(found.level), level_meaning=found.meaning)


def _row_bounds(uncertainty_set: FamilySet, population: Population, reference_action: int) -> np.ndarray:
    """Each population row's lower bound per action: the family's own, or its formula elsewhere."""
    own = uncertainty_set.family_lower(population, reference_action)
    if own is not None:
        return own
    return uncertainty_set.lower_bound(candidate_features(uncertainty_set, population, reference_action))


def _relaxed(uncertainty_set, population, units, reference_action, welfare, floor, common) -> Policy:
    """Each unit plays argmax_a of its own lower bound (its mean over the unit's rows)."""
    family = isinstance(uncertainty_set, FamilySet)
    if family:  # the bounds come with the set: at LLM width no 2.6 GB of features is made again
        scores = units.mean(_row_bounds(uncertainty_set, population, reference_action))
    else:
        z = candidate_features(uncertainty_set, population, reference_action)
        scores = units.mean(uncertainty_set.lower_bound(z))
    best = scores.max(axis=1)
    probs = np.eye(population.n_actions)[scores.argmax(axis=1)]
    value = float(units.weights @ (best if welfare == "utilitarian" else np.log(best - floor)))
    if family:  # bounds hold value by value: the policy's is the weighted sum of its actions' bounds
        pessimistic = float(units.weights @ np.sum(probs * scores, axis=1))
    else:
        pessimistic = ExactProblem(units.mean(z), units.weights).worst_case(uncertainty_set, probs)
    return Policy(probs, objective="relaxed", pessimistic_value=pessimistic, objective_value=value, **common)


def _exact_nash(uncertainty_set, problem: ExactProblem, floor: float, common) -> Policy:
    if not isinstance(uncertainty_set, NashSet):
        raise TypeError(f"objective='exact' with welfare='nash' needs a set with an exact Nash program "
                        f"(solve_nash: the hull of draws, DrawsSet); {type(uncertainty_set).__name__} has "
                        "none. Use objective='relaxed', whose per-unit rule guarantees the Nash welfare of "
                        "the units' lower bounds.")
    probs, value = uncertainty_set.solve_nash(problem, floor)
    return Policy(probs, objective="exact", objective_value=value,
                  pessimistic_value=problem.worst_case(uncertainty_set, probs), **common)
