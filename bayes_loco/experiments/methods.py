"""The methods compared in every study, run on one replication's data.

Each method is a name mapped to how its policy is made from shared fits, so the
MLE, the low-rank fit, PRS and the posterior are computed once per replication
and every policy goes through the one solver.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..data import Population, PreferenceData
from ..evaluate import suboptimality
from ..frequentist import fit_mle, fit_prs, select_rank
from ..policy import greedy_policy, pessimistic_policy
from ..sets import EllipsoidSet
from ..simulate import PaperProblem


@dataclass(frozen=True)
class MethodSpec:
    """How a method builds its policy.

    ``fit`` in {"mle", "prs", "low_rank", "gic", "posterior"} ("gic": PRS at the rank
    GIC selects among 1 … :data:`GIC_RANKS`); ``set`` in {None (greedy),
    "gram", "wald"} for the frequentist fits and {None (greedy under the posterior
    mean), "ellipsoid", "draws", "quantile"} (credible-set kinds) and "sandwich"
    (the ellipsoid with the sandwich covariance) for the posterior; ``objective`` in
    {"greedy", "relaxed", "exact"}.
    """

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
    "PRS-GIC": MethodSpec("gic", "gram", "relaxed"),
    "Posterior-mean-Greedy": MethodSpec("posterior", None, "greedy"),
    "Posterior-exact-ellipsoid": MethodSpec("posterior", "ellipsoid", "exact"),
    "Posterior-exact-sandwich": MethodSpec("posterior", "sandwich", "exact"),
    "Posterior-exact-draws": MethodSpec("posterior", "draws", "exact"),
    "Posterior-relaxed-quantile": MethodSpec("posterior", "quantile", "relaxed"),
}
DEFAULT_METHODS = ("MLE-Greedy", "MLE-Pessimistic", "PRS", "PRS-exact-Wald")
POSTERIOR_DEFAULTS = {"draws": 500, "tune": 500, "chains": 4, "cores": 1}
GIC_RANKS = 5


def _make_set(spec: MethodSpec, fit, c2: float, level: float):
    if spec.set is None:
        return None
    if spec.fit == "posterior":
        if spec.set == "sandwich":
            return fit.credible_set(level, "ellipsoid", covariance="sandwich")
        return fit.credible_set(level, spec.set)
    if spec.set == "gram":
        return fit.gram_set(c2) if spec.fit == "mle" else fit.uncertainty_set
    return fit.confidence_set(level)


def _truth_columns(uset, truth) -> dict:
    """Whether θ* is in the set; for an ellipsoid also its W-distance, radius and k_eff.

    With the distance, coverage at any other level follows from the same run:
    θ* is in the level-α set iff distance² ≤ χ²_{k_eff}(α) (Wald and credible sets).
    """
    out = dict.fromkeys(("covered", "truth_distance", "radius", "k_eff"), np.nan)
    if hasattr(uset, "contains"):  # not greedy, nor a pointwise-quantile set (not a set of θ)
        out["covered"] = float(np.all(uset.contains(truth)))
    if isinstance(uset, EllipsoidSet):
        out |= {"truth_distance": float(uset.distance(truth)), "radius": float(uset.radius),
                "k_eff": float(uset.effective_dim)}
    return out


def run_methods(problem: PaperProblem, data: PreferenceData, populations: dict[str, Population],
                methods, *, rank: int, c2: float = 5.0, level: float = 0.9, ridge: float = 1.0,
                n_initial: int | None = None, seed: int = 0,
                posterior: dict | None = None) -> list[dict]:
    """One row per method × scope with sub-optimality, coverage of the truth and timings.

    ``populations`` maps a scope ("personalised", "global") to its evaluation
    population. Coverage is whether Θ* (in the set's coordinates: θ*_rtv for PRS
    and the posterior, vec Θ* for the MLE) lies in the method's set. The
    posterior methods share one :func:`~bayes_loco.bayes.fit_posterior` run,
    started at PRS's low-rank fit and in its RTV coordinates, with ``seed`` and
    the arguments ``posterior`` (default :data:`POSTERIOR_DEFAULTS`); their rows
    carry the sampler's largest R-hat and its divergences.
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
            elif kind == "gic":
                candidates = range(1, min(GIC_RANKS, data.d_x, data.d_phi) + 1)
                selection = select_rank(data, candidates, ridge=ridge)
                # Without a split GIC's fit at the chosen rank is PRS's low-rank fit: reuse it.
                fits[kind] = fit_prs(data, selection.rank, c2=c2, n_initial=n_initial, ridge=ridge,
                                     low_rank=selection.best if n_initial is None else None)
            elif kind == "posterior":
                # Imported here: PyMC takes seconds to import and only these methods need it.
                from ..bayes import fit_posterior

                start_fit = get_fit("prs").low_rank
                start = time.perf_counter()
                fits[kind] = fit_posterior(data, rank, initial=start_fit, random_seed=seed,
                                           progressbar=False, **(POSTERIOR_DEFAULTS | (posterior or {})))
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
        estimate = fit.theta_mean if spec.fit == "posterior" else fit.theta
        start = time.perf_counter()
        uset = _make_set(spec, fit, c2, level)
        set_seconds = time.perf_counter() - start
        truth_columns = _truth_columns(
            uset, None if uset is None else uset.coordinates.to_coordinates(problem.theta))
        sampler = fit.diagnostics if spec.fit == "posterior" else None
        for scope, population in populations.items():
            start = time.perf_counter()
            if uset is None:
                policy = greedy_policy(estimate, population, scope=scope)
            else:
                policy = pessimistic_policy(uset, population, objective=spec.objective, scope=scope)
            rows.append({
                "method": name, "fit": spec.fit, "set_kind": spec.set or "none",
                "level": level if spec.set not in (None, "gram") else np.nan, "objective": spec.objective,
                "scope": scope, "suboptimality": suboptimality(policy, problem, population),
                "pessimistic_value": policy.pessimistic_value,
                "relative_gap": np.nan if policy.certificate is None else policy.certificate.relative_gap,
                **truth_columns,
                "theta_error": float(np.linalg.norm(estimate - problem.theta)),
                "fit_seconds": fit_seconds.get(spec.fit, 0.0) + set_seconds,
                "policy_seconds": time.perf_counter() - start,
                "selected_rank": fit.rank if spec.fit == "gic" else np.nan,
                "max_rhat": np.nan if sampler is None else sampler.max_rhat,
                "divergences": np.nan if sampler is None else sampler.divergences,
            })
    return rows
