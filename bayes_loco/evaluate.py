"""Policy value and sub-optimality against the true Θ*."""

from __future__ import annotations

import numpy as np

from ._validation import check_option
from .data import Population
from .model import rewards
from .policy import SCOPES, Policy, _units


def _true_rewards(truth, population: Population) -> np.ndarray:
    theta = getattr(truth, "theta", truth)
    theta = np.asarray(theta, dtype=float)
    if theta.shape != (population.contexts.shape[1], population.features.shape[2]):
        raise ValueError(f"truth's Θ has shape {theta.shape}, the population needs "
                         f"({population.contexts.shape[1]}, {population.features.shape[2]})")
    return rewards(theta, population.contexts, population.features)


def policy_value(policy: Policy, truth, population: Population) -> float:
    """E_ρ Σ_a π(a | x, s) r*(x, s, a) under the true Θ* (``truth`` is Θ* or has ``.theta``)."""
    r = _true_rewards(truth, population)
    if policy.groups.shape[0] != population.n:
        raise ValueError(f"policy was solved on {policy.groups.shape[0]} rows, population has {population.n}")
    return float(np.mean(np.sum(policy.row_probabilities * r, axis=1)))


def optimal_value(truth, population: Population, scope: str = "personalised") -> float:
    """Value of the best policy of ``scope``: E_ρ max_a r* or E_s max_a E_{x|s} r*."""
    check_option(scope, "scope", SCOPES)
    r = _true_rewards(truth, population)
    _, average, weights = _units(population, scope)
    return float(weights @ (average @ r).max(axis=1))


def suboptimality(policy: Policy, truth, population: Population) -> float:
    """Optimal value minus the policy's value, for the policy's own scope (≥ 0)."""
    return optimal_value(truth, population, policy.scope) - policy_value(policy, truth, population)
