"""Policy value and sub-optimality against the truth Θ*."""

from __future__ import annotations

import numpy as np

from ._validation import as_float_array, check_option
from .data import SCOPES, Population
from .model import rewards
from .policy import Policy


def truth_theta(truth, d_x: int, d_phi: int) -> np.ndarray:
    """Θ* from ``truth``: Θ* itself (d_x × d_φ) or a :class:`~bayes_loco.problems.Problem` (``.theta``)."""
    theta = as_float_array(getattr(truth, "theta", truth), "truth", 2)
    if theta.shape != (d_x, d_phi):
        raise ValueError(f"truth: Θ* must have shape (d_x, d_phi) = ({d_x}, {d_phi}), got {theta.shape}")
    return theta


def truth_rewards(truth, population: Population) -> np.ndarray:
    """True rewards r*(x_i, s_i, a) = x_iᵀ Θ* φ(s_i, a), shape (n, A); ``truth`` as in :func:`truth_theta`."""
    theta = truth_theta(truth, population.d_x, population.d_phi)
    return rewards(theta, population.contexts, population.features)


def check_policy(policy, population) -> Policy:
    """``policy`` as a :class:`Policy` solved on ``population``, or one error saying which was wrong."""
    if not isinstance(policy, Policy):
        raise TypeError(f"policy must be a Policy (from greedy_policy or pessimistic_policy), got "
                        f"{type(policy).__name__}")
    if not isinstance(population, Population):
        raise TypeError(f"population must be a Population, got {type(population).__name__}")
    if policy.unit_of_row.shape[0] != population.n:
        raise ValueError(f"population has {population.n} rows, but the policy was solved on "
                         f"{policy.unit_of_row.shape[0]}: evaluate it on the population it was solved on")
    if policy.probabilities.shape[1] != population.n_actions:
        raise ValueError(f"population has {population.n_actions} actions, but the policy chooses among "
                         f"{policy.probabilities.shape[1]}: evaluate it on the population it was solved on")
    if policy.population is not None and policy.population != population.fingerprint:
        raise ValueError("population is not the one the policy was solved on (its fingerprint differs, "
                         "though the sizes match): evaluate the policy on its own population, or solve a "
                         "policy on this one")
    return policy


def policy_value(policy: Policy, truth, population: Population) -> float:
    """E_ρ Σ_a π(a | x, s) r*(x, s, a) under the true Θ* (``truth`` is Θ* or has ``.theta``)."""
    check_policy(policy, population)
    r = truth_rewards(truth, population)
    return float(np.mean(np.sum(policy.row_probabilities * r, axis=1)))


def relative_value(policy: Policy, truth, population: Population) -> float:
    """The policy's true value minus that of always playing its reference action a_ref.

    The quantity ``policy.pessimistic_value`` bounds from below: the exact and relaxed
    objectives score actions relative to a_ref (:mod:`bayes_loco.policy`), so a
    pessimistic policy's guarantee holds when ``relative_value ≥ pessimistic_value``.
    """
    check_policy(policy, population)
    reference = truth_rewards(truth, population)[:, policy.reference_action]
    return policy_value(policy, truth, population) - float(np.mean(reference))


def optimal_value(truth, population: Population, scope: str = "personalised") -> float:
    """Value of the best policy of ``scope``: E_ρ max_a r* or E_s max_a E_{x|s} r*."""
    check_option(scope, "scope", SCOPES)
    if not isinstance(population, Population):
        raise TypeError(f"population must be a Population, got {type(population).__name__}")
    r = truth_rewards(truth, population)
    units = population.units(scope)
    return float(units.weights @ units.mean(r).max(axis=1))


def suboptimality(policy: Policy, truth, population: Population) -> float:
    """Optimal value minus the policy's value, for the policy's own scope (≥ 0)."""
    check_policy(policy, population)
    return optimal_value(truth, population, policy.scope) - policy_value(policy, truth, population)
