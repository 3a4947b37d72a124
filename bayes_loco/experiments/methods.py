"""The methods compared in every study, run on one replication's data.

Each method is a name mapped to how its policy is made from shared fits, so the
MLE, the low-rank fit and PRS are computed once per replication and every
policy goes through the one solver.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..data import Population, PreferenceData
from ..evaluate import suboptimality
from ..frequentist import fit_mle, fit_prs
from ..policy import greedy_policy, pessimistic_policy
from ..simulate import PaperProblem


@dataclass(frozen=True)
class MethodSpec:
    """How a method builds its policy: ``fit`` in {"mle", "prs", "low_rank"}, ``set`` in
    {None (greedy), "gram", "wald"}, ``objective`` in {"relaxed", "exact"}."""

    fit: str
    set: str | None
    objective: str


METHODS: dict[str, MethodSpec] = {
    "MLE-Greedy": MethodSpec("mle", None, "greedy"),
    "MLE-Pessimistic": MethodSpec("mle", "gram", "relaxed"),
    "PRS": MethodSpec("prs", "gram", "relaxed"),
    "PRS-exact-Wald": MethodSpec("prs", "wald", "exact"),
    "PRS-relaxed-Wald": MethodSpec("prs", "wald", "relaxed"),
    "PRS-exact-Gram": MethodSpec("prs", "gram", "exact"),
    "LowRank-Greedy": MethodSpec("low_rank", None, "greedy"),
    "MLE-exact-Wald": MethodSpec("mle", "wald", "exact"),
}
DEFAULT_METHODS = ("MLE-Greedy", "MLE-Pessimistic", "PRS", "PRS-exact-Wald")


def run_methods(problem: PaperProblem, data: PreferenceData, populations: dict[str, Population],
                methods, *, rank: int, c2: float = 5.0, level: float = 0.9, ridge: float = 1.0,
                n_initial: int | None = None) -> list[dict]:
    """One row per method × scope with sub-optimality, coverage of the truth and timings.

    ``populations`` maps a scope ("personalised", "global") to its evaluation
    population. Coverage is whether Θ* (in the set's coordinates: θ*_rtv for PRS,
    vec Θ* for the MLE) lies in the method's set.
    """
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown methods {unknown}; known: {', '.join(METHODS)}")
    fits: dict[str, object] = {}
    fit_seconds: dict[str, float] = {}

    def get_fit(kind):
        if kind not in fits:
            start = time.perf_counter()
            if kind == "mle":
                fits[kind] = fit_mle(data, ridge=ridge)
            else:
                fits["prs"] = fit_prs(data, rank, c2=c2, n_initial=n_initial, ridge=ridge)
                fits["low_rank"] = fits["prs"].low_rank
                fit_seconds["low_rank"] = time.perf_counter() - start
            fit_seconds[kind] = time.perf_counter() - start
        return fits[kind]

    rows = []
    for name in methods:
        spec = METHODS[name]
        fit = get_fit(spec.fit)
        estimate = fit.theta
        start = time.perf_counter()
        uset = None
        if spec.set == "gram":
            uset = fit.gram_set(c2) if spec.fit == "mle" else fit.uncertainty_set
        elif spec.set == "wald":
            uset = fit.confidence_set(level)
        set_seconds = time.perf_counter() - start
        truth = None if uset is None else uset.coordinates.to_coordinates(problem.theta)
        for scope, population in populations.items():
            start = time.perf_counter()
            if uset is None:
                policy = greedy_policy(estimate, population, scope=scope)
            else:
                policy = pessimistic_policy(uset, population, objective=spec.objective, scope=scope)
            rows.append({
                "method": name, "fit": spec.fit, "set_kind": spec.set or "none",
                "level": level if spec.set == "wald" else np.nan, "objective": spec.objective,
                "scope": scope, "suboptimality": suboptimality(policy, problem, population),
                "pessimistic_value": policy.pessimistic_value,
                "relative_gap": np.nan if policy.certificate is None else policy.certificate.relative_gap,
                "covered": np.nan if uset is None else float(uset.contains(truth)),
                "theta_error": float(np.linalg.norm(estimate - problem.theta)),
                "fit_seconds": fit_seconds.get(spec.fit, 0.0) + set_seconds,
                "policy_seconds": time.perf_counter() - start,
            })
    return rows
