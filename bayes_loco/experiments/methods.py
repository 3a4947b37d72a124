"""The methods compared in every study, and the one harness that runs them on a data set.

A method is a name mapped to a :class:`MethodSpec`: which fit, which of the fit's sets, which
objective. The fits are made once per data set by the fitters of :data:`FITTERS` and shared by every
method; every set comes from the :class:`~bayes_loco.results.Fit` protocol (``penalty_set`` for the
paper's Gram set, ``calibrated_set`` for the others) and every policy from the one solver, so nothing
here asks which road produced a fit. Studies call :func:`run_methods`; users call
:func:`compare_policies`; both build their rows with the same code.

To add a fit: a fitter in :data:`FITTERS` and methods in :data:`METHODS` that name it. To add a set
kind: teach the fit's ``calibrated_set`` the kind and add a method that names it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._checks import checks_data
from .._validation import LEVEL, check_level, check_option, check_real
from ..certify import certify_row_space, certify_split
from ..config import get_config
from ..data import PreferenceData
from ..design import mean_candidate_features
from ..evaluate import relative_value, suboptimality, truth_rewards, truth_theta
from ..frequentist import fit_low_rank, fit_mle, fit_prs, select_rank
from ..policy import best_bound_policy, greedy_policy, pessimistic_policy
from ..population import SCOPES, Population
from ..results import Fit
from ..sets import EllipsoidSet, ValueFamilySet, size_for_values, value_family
from .columns import COMPARE_COLUMNS, EXTRA_COLUMNS, PolicyTable
from .posterior_settings import posterior_arguments


@dataclass(frozen=True)
class MethodSpec:
    """How a method builds its policy.

    Attributes
    ----------
    fit : str
        A key of :data:`FITTERS`: "mle", "prs", "low_rank", "gic" (PRS at the rank
        GIC selects among 1 … ``config["gic_ranks"]``) or "posterior".
    set : str or None
        None: the greedy policy under the fit's Θ̂ (the posterior mean for a
        posterior). "gram": the paper's tuned set ``fit.penalty_set(c2)``.
        Otherwise a kind of ``fit.calibrated_set(level, kind)``: "wald" for the
        frequentist fits; "credible" (the credible ellipsoid), "sandwich",
        "draws" (hull of draws), "quantile" or "cvar" for a posterior.
    objective : {"greedy", "relaxed", "exact", "certified", "certified-row-space"}
        "certified": candidates chosen on the fit's first N₀ comparisons (the greedy policy of its
        low-rank fit, and that policy kept on its rows of largest estimated gain), their values bounded
        simultaneously by the set fitted on the rest (:func:`~bayes_loco.certify_policies`);
        "certified-row-space": bounded instead in a row space fitted on half the rest
        (:func:`~bayes_loco.certify.certify_row_space`).
    sized : bool
        Resize the (ellipsoid) set for each scope to guard only the values of
        that scope's policies on its population
        (:func:`~bayes_loco.sets.size_for_values`).
    family : bool
        Bound instead only the values of each scope's population (its rows ×
        actions), all at once, from the set: max-∣t∣ from an ellipsoid's W, max-rank
        from a posterior's draws (``set="quantile"``; :func:`~bayes_loco.sets.value_family`).
    radii : tuple of float
        Solve the policy at these fixed radii instead (an ellipsoid's R, a value
        family's critical value c), each a row named ``"<method> @ <radius>"`` with
        no level: the radius frontier of sub-optimality and bound held.
    union : tuple of str
        Solve these methods each at level 1 − α/m and keep the largest bound
        (:func:`~bayes_loco.best_bound_policy`: level 1 − α for the pair).
    """

    fit: str
    set: str | None
    objective: str
    sized: bool = False
    family: bool = False
    radii: tuple[float, ...] = ()
    union: tuple[str, ...] = ()


#: Every method by name: the fit it uses, its uncertainty set and the objective of its policy.
METHODS: dict[str, MethodSpec] = {
    "MLE-Greedy": MethodSpec("mle", None, "greedy"),
    "MLE-Pessimistic": MethodSpec("mle", "gram", "relaxed"),
    "PRS": MethodSpec("prs", "gram", "relaxed"),
    "PRS-exact-Wald": MethodSpec("prs", "wald", "exact"),
    "PRS-relaxed-Wald": MethodSpec("prs", "wald", "relaxed"),
    "PRS-exact-Gram": MethodSpec("prs", "gram", "exact"),
    "PRS-exact-Wald-values": MethodSpec("prs", "wald", "exact", sized=True),
    "LowRank-Greedy": MethodSpec("low_rank", None, "greedy"),
    "MLE-exact-Wald": MethodSpec("mle", "wald", "exact"),
    "PRS-GIC": MethodSpec("gic", "gram", "relaxed"),
    "Posterior-mean-Greedy": MethodSpec("posterior", None, "greedy"),
    # The method names predate the set kinds' names: "ellipsoid" is the credible ellipsoid.
    "Posterior-exact-ellipsoid": MethodSpec("posterior", "credible", "exact"),
    "Posterior-relaxed-ellipsoid": MethodSpec("posterior", "credible", "relaxed"),
    "Posterior-exact-sandwich": MethodSpec("posterior", "sandwich", "exact"),
    "Posterior-exact-draws": MethodSpec("posterior", "draws", "exact"),
    "Posterior-relaxed-draws": MethodSpec("posterior", "draws", "relaxed"),
    "Posterior-relaxed-quantile": MethodSpec("posterior", "quantile", "relaxed"),
    "Posterior-exact-cvar": MethodSpec("posterior", "cvar", "exact"),
    "Posterior-exact-ellipsoid-values": MethodSpec("posterior", "credible", "exact", sized=True),
    "PRS-Greedy": MethodSpec("prs", None, "greedy"),
    "PRS-relaxed-family": MethodSpec("prs", "wald", "relaxed", family=True),
    "PRS-relaxed-family-frontier": MethodSpec("prs", "wald", "relaxed", family=True,
                                              radii=(0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0)),
    "MLE-relaxed-family": MethodSpec("mle", "wald", "relaxed", family=True),
    "PRS-best-of-exact-and-family": MethodSpec("prs", "wald", "exact",
                                               union=("PRS-exact-Wald", "PRS-relaxed-family")),
    "Posterior-relaxed-family": MethodSpec("posterior", "quantile", "relaxed", family=True),
    "PRS-split-certified": MethodSpec("prs_split", "wald", "certified"),
    "PRS-split-certified-row-space": MethodSpec("prs_split", None, "certified-row-space"),
    "PRS-best-of-exact-and-row-space": MethodSpec("prs", "wald", "exact",
                                                  union=("PRS-exact-Wald", "PRS-split-certified-row-space")),
}
#: The methods a study runs unless it names others: the paper's three and the exact Wald policy.
DEFAULT_METHODS = ("MLE-Greedy", "MLE-Pessimistic", "PRS", "PRS-exact-Wald")
#: :func:`compare_policies`' default: the paper's PRS set and the Wald set against every posterior set.
COMPARE_METHODS = ("PRS", "PRS-exact-Gram", "PRS-exact-Wald", "PRS-relaxed-Wald", "LowRank-Greedy",
                   "Posterior-mean-Greedy", "Posterior-exact-ellipsoid", "Posterior-relaxed-ellipsoid",
                   "Posterior-exact-sandwich", "Posterior-exact-draws", "Posterior-relaxed-draws",
                   "Posterior-relaxed-quantile", "Posterior-exact-cvar")


# ------------------------------------------------------------------------------------------ fits

@dataclass(frozen=True)
class Fitter:
    """How one kind of fit is made from the shared :class:`Fits` of a data set.

    ``at_rank``: the fit has the rank asked for (a fit passed in must match it);
    ``selects_rank``: the fit chooses its own rank, reported as ``selected_rank``.
    """

    make: Callable[[Fits], Fit]
    at_rank: bool = True
    selects_rank: bool = False


def _fit_mle(fits: Fits) -> Fit:
    return fit_mle(fits.data, ridge=fits.ridge)


def _fit_prs(fits: Fits) -> Fit:
    if fits.n_initial is not None:
        return fit_prs(fits.data, fits.rank, n_initial=fits.n_initial, ridge=fits.ridge)
    if fits.data.d_x * fits.data.d_phi > get_config()["mle_start_max"]:
        # Reward-model width: FGD's own start is the spectral one, and no MLE of d_x·d_φ entries is fitted.
        return fit_prs(fits.data, fits.rank, ridge=fits.ridge)
    # Without a split, PRS's FGD starts from the MLE baselines' own fit (same data, same ridge).
    low_rank = fit_low_rank(fits.data, fits.rank, ridge=fits.ridge, initial=fits["mle"])
    return fit_prs(fits.data, fits.rank, ridge=fits.ridge, low_rank=low_rank)


def _fit_prs_split(fits: Fits) -> Fit:
    # The certified policy's fit: PRS split at the study's N₀, or in half where the study does not split.
    n_initial = fits.data.n_comparisons // 2 if fits.n_initial is None else fits.n_initial
    return fit_prs(fits.data, fits.rank, n_initial=n_initial, ridge=fits.ridge)


def _fit_low_rank(fits: Fits) -> Fit:
    # PRS's own low-rank fit (on the first N₀ comparisons when PRS splits the data).
    return fits["prs"].low_rank


def _fit_gic(fits: Fits) -> Fit:
    data = fits.data
    ranks = range(1, min(get_config()["gic_ranks"], data.d_x, data.d_phi) + 1)
    selection = select_rank(data, ranks, ridge=fits.ridge)
    # Without a split GIC's fit at the chosen rank is PRS's low-rank fit: reuse it.
    return fit_prs(data, selection.rank, n_initial=fits.n_initial, ridge=fits.ridge,
                   low_rank=selection.best if fits.n_initial is None else None)


def _fit_posterior(fits: Fits) -> Fit:
    # Imported here: PyMC takes seconds to import and only the posterior methods need it.
    from ..bayes import fit_posterior

    # Started at (and in the RTV coordinates of) PRS's low-rank fit, so its sets live where PRS's do.
    arguments = {"start": fits["low_rank"], "random_seed": fits.seed, "progressbar": False}
    return fit_posterior(fits.data, fits.rank, **(arguments | posterior_arguments(fits.posterior)))


#: The fitters by a method's ``fit`` (``"mle"``, ``"prs"``, ``"prs_split"``, ``"low_rank"``, ``"gic"``,
#: ``"posterior"``): each
#: fits a task's data once, and the methods that share a fit share it.
FITTERS: dict[str, Fitter] = {
    "mle": Fitter(_fit_mle, at_rank=False),
    "prs": Fitter(_fit_prs),
    "prs_split": Fitter(_fit_prs_split),
    "low_rank": Fitter(_fit_low_rank),
    "gic": Fitter(_fit_gic, at_rank=False, selects_rank=True),
    "posterior": Fitter(_fit_posterior),
}


class Fits:
    """The fits of one data set, each made on first use by :data:`FITTERS` and shared by every method.

    ``seconds(kind)`` is the wall time of the fit and of the fits it started from
    (the posterior's includes the PRS fit it starts at), whatever order the
    methods ask in; a fit passed in ``given`` counts its ``diagnostics.seconds``.
    """

    def __init__(self, data: PreferenceData, *, rank: int, ridge: float = 0.0, n_initial: int | None = None,
                 seed: int = 0, posterior: Mapping | None = None, given: Mapping[str, Fit] | None = None):
        self.data, self.rank, self.ridge, self.n_initial = data, rank, ridge, n_initial
        self.seed, self.posterior = seed, posterior
        # The sets made of the fits, by (fit, set, level[, scope]): the methods of one set share it (at LLM
        # width a Wald set's Fisher information takes minutes).
        self.sets: dict[tuple, object] = {}
        self._fits: dict[str, Fit] = {}
        self._own: dict[str, float] = {}
        self._needs: dict[str, set[str]] = {}
        self._making: list[list] = []  # [kind, seconds spent in the fits it needed] of the fits being made
        for kind, fit in (given or {}).items():
            self._fits[kind] = fit
            self._own[kind] = float(fit.diagnostics.seconds)
            self._needs[kind] = set()

    def __getitem__(self, kind: str) -> Fit:
        if self._making:
            self._needs[self._making[-1][0]].add(kind)
        if kind not in self._fits:
            self._needs[kind] = set()
            self._making.append([kind, 0.0])
            start = time.perf_counter()
            try:
                fit = FITTERS[kind].make(self)
            finally:
                _, nested = self._making.pop()
            elapsed = time.perf_counter() - start
            self._fits[kind], self._own[kind] = fit, elapsed - nested
            if self._making:
                self._making[-1][1] += elapsed
        return self._fits[kind]

    def seconds(self, kind: str) -> float:
        return self._own[kind] + sum(self.seconds(need) for need in self._needs[kind])


# ------------------------------------------------------------------------------------- rows

def _truth_columns(uset, truth) -> dict:
    """Whether θ* is in the set; for an ellipsoid also its W-distance, radius and k_eff; for a value family
    its critical value c as the radius.

    ``truth`` is θ* in the set's coordinates, or None (no truth: coverage and
    distance are NaN). With the distance, coverage at any other level follows
    from the same run: θ* is in the level-α set iff distance² ≤ χ²_k_eff(α)
    (Wald and credible sets). A value family's coverage is of θ*'s values on its
    population (every member's z_uaᵀθ* within its interval).
    """
    out = dict.fromkeys(("covered", "truth_distance", "radius", "k_eff"), np.nan)
    # Not greedy, nor a pointwise-quantile set; sets sized for values or CVaR bound values, not θ*.
    claims_theta = getattr(uset, "sized_for", None) is None and getattr(uset, "kind", None) != "cvar"
    if truth is not None and hasattr(uset, "contains") and claims_theta:
        out["covered"] = float(np.all(uset.contains(truth)))
    if isinstance(uset, EllipsoidSet):
        out |= {"radius": float(uset.radius), "k_eff": float(uset.effective_dim)}
        if truth is not None:
            out["truth_distance"] = float(uset.distance(truth))
    if isinstance(uset, ValueFamilySet):
        out["radius"] = uset.critical
    return out


def _make_set(spec: MethodSpec, fits: Fits, c2: float, level: float):
    """The method's set before any resizing, shared by every method that asks for the same one."""
    if spec.set is None:
        return None
    key = (spec.fit, spec.set, c2 if spec.set == "gram" else level)
    if key not in fits.sets:
        fit = fits[spec.fit]
        fits.sets[key] = fit.penalty_set(c2) if spec.set == "gram" else fit.calibrated_set(level, spec.set)
    return fits.sets[key]


def _scope_set(spec: MethodSpec, fits: Fits, base_set, level: float, scope: str, population: Population):
    """The set a scope's policy is solved under: the method's set, resized for the scope's values, or the
    value family of its population (shared by the methods of one base set)."""
    if spec.sized:
        return size_for_values(base_set, population, scope=scope)
    if not spec.family:
        return base_set
    key = (spec.fit, spec.set, level, "family", population.fingerprint)
    if key not in fits.sets:
        fits.sets[key] = value_family(base_set, population, level)
    return fits.sets[key]


def _value_columns(policy, uset, population: Population, theta_star) -> dict:
    """Whether the policy's true value (relative to the reference action) is at least its pessimistic value,
    and C* = ‖m(π*)‖_W⁻¹ of the optimal policy π* in an ellipsoid's metric (the paper's concentrability)."""
    out = {"value_covered": np.nan, "c_star": np.nan}
    if theta_star is None or np.isnan(policy.pessimistic_value):  # greedy policies state no bound
        return out
    true_value = relative_value(policy, theta_star, population)
    out["value_covered"] = float(true_value >= policy.pessimistic_value - 1e-12)
    if not isinstance(uset, EllipsoidSet):
        return out
    if 8.0 * population.n * population.n_actions * uset.coordinates.dim <= get_config()["c_star_max_bytes"]:
        units = population.units(policy.scope)
        z = mean_candidate_features(uset, population, units, policy.reference_action)
        best = units.mean(truth_rewards(theta_star, population)).argmax(axis=1)
        out["c_star"] = float(uset.dual_norm(units.weights @ z[np.arange(units.n), best]))
    return out


def _at_radius(uset, radius: float):
    """The set with a fixed radius and no level: an ellipsoid's R, a value family's critical value c."""
    if isinstance(uset, ValueFamilySet):
        return uset.with_critical(radius)
    return uset.with_radius(radius, level=None)


def _method_rows(name: str, fits: Fits, populations: Mapping[str, Population], theta_star, *,
                 c2: float, level: float, columns: tuple[str, ...] = ()) -> list[dict]:
    """The rows of one method, one per scope and radius (see :data:`COLUMNS`, and ``columns`` of
    :data:`EXTRA_COLUMNS`)."""
    spec = METHODS[name]
    fit = fits[spec.fit]
    start = time.perf_counter()
    base_set = _make_set(spec, fits, c2, level)
    set_seconds = time.perf_counter() - start
    truth = None if base_set is None or theta_star is None else (
        base_set.coordinates.to_coordinates(theta_star))
    per_scope = spec.sized or spec.family
    # A set that is not resized is the same for every scope: its coverage (an LP for a hull) once.
    base_columns = None if per_scope else _truth_columns(base_set, truth)
    diagnostics = fit.diagnostics
    rows = []
    for scope, population in populations.items():
        start = time.perf_counter()
        scope_set = _scope_set(spec, fits, base_set, level, scope, population)
        variants = ([(f"{name} @ {r:g}", _at_radius(scope_set, r)) for r in spec.radii] if spec.radii
                    else [(name, scope_set)])
        for label, uset in variants:
            # A fixed radius's row records the radius, not coverage: the frontier asks for the bound.
            truth_columns = (_truth_columns(uset, None) if uset is not scope_set
                             else _truth_columns(uset, truth) if per_scope else base_columns)
            row_level = np.nan if uset is None or uset.level is None else uset.level
            if spec.objective.startswith("certified"):
                certificate = _certificate(spec, fits, level, scope, population, uset)
                policy, row_level = certificate.policy, certificate.level
                truth_columns = {**truth_columns, "radius": certificate.critical}
            elif uset is None:
                policy = greedy_policy(fit.theta, population, scope=scope)
            elif spec.union:
                share = 1 - (1 - level) / len(spec.union)
                policy = best_bound_policy([_member_policy(m, fits, c2, share, scope, population)
                                            for m in spec.union])
            else:
                policy = pessimistic_policy(uset, population, objective=spec.objective, scope=scope)
            rows.append({
                "method": label, "fit": spec.fit, "set_kind": "none" if uset is None else uset.kind,
                "level": row_level,
                "objective": spec.objective, "scope": scope,
                "suboptimality": (np.nan if theta_star is None
                                  else suboptimality(policy, theta_star, population)),
                "pessimistic_value": policy.pessimistic_value,
                "relative_gap": np.nan if policy.certificate is None else policy.certificate.relative_gap,
                **truth_columns,
                **_value_columns(policy, uset, population, theta_star),
                "theta_error": (np.nan if theta_star is None
                                else float(np.linalg.norm(fit.theta - theta_star))),
                "fit_seconds": fits.seconds(spec.fit) + set_seconds,
                "policy_seconds": time.perf_counter() - start,
                "selected_rank": fit.rank if FITTERS[spec.fit].selects_rank else np.nan,
                "max_rhat": diagnostics.max_rhat,
                "divergences": np.nan if diagnostics.divergences is None else diagnostics.divergences,
                "chart_rank": _chart_rank(fit),
                **{column: EXTRA_COLUMNS[column](policy, uset, population, theta_star) for column in columns},
            })
    return rows


def _member_policy(name: str, fits: Fits, c2: float, level: float, scope: str, population: Population):
    """The policy of method ``name`` at ``level`` on one scope: a member of a union's choice."""
    spec = METHODS[name]
    if spec.objective.startswith("certified"):
        return _certificate(spec, fits, level, scope, population).policy
    uset = _scope_set(spec, fits, _make_set(spec, fits, c2, level), level, scope, population)
    return pessimistic_policy(uset, population, objective=spec.objective, scope=scope)


def _certificate(spec: MethodSpec, fits: Fits, level: float, scope: str, population: Population,
                 uncertainty_set=None):
    """A certified method's certificate: the split fit's reduced model, or a row space fitted on half its
    second part (which then fits its own model: no set of the fit's)."""
    fit = fits[spec.fit]
    if spec.objective == "certified":
        return certify_split(fit, population, level, scope=scope, uncertainty_set=uncertainty_set)
    return certify_row_space(fit.low_rank, fit.estimation_data, population, level, scope=scope,
                             ridge=fits.ridge)


def _chart_rank(fit: Fit) -> float:
    """r₁ of a NUTS posterior: how many components it sampled in chart coordinates (0: the factored model).

    What ``parametrization="auto"`` chose differs between data sets; NaN for every other fit.
    """
    nuts = getattr(fit, "settings", {}).get("nuts")
    if nuts is None:
        return np.nan
    return float(nuts.get("chart_rank") or 0)


def _check_methods(methods) -> list[str]:
    methods = [methods] if isinstance(methods, str) else list(methods)
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise ValueError(f"methods: unknown methods {unknown}; known: {', '.join(METHODS)}" if unknown
                         else "methods: no method given")
    return methods


@checks_data
def run_methods(truth, data: PreferenceData, populations: Mapping[str, Population], methods: Iterable[str], *,
                rank: int, c2: float = 5.0, level: float = LEVEL, ridge: float = 1.0,
                n_initial: int | None = None, seed: int = 0, posterior: Mapping | None = None,
                fits: Mapping[str, Fit] | None = None, columns: Iterable[str] = ()) -> list[dict]:
    """One row per method × scope with sub-optimality, coverage of the truth and timings.

    Parameters
    ----------
    truth : Problem, ndarray or None
        The truth Θ* (a :class:`~bayes_loco.problems.Problem` or anything with
        ``.theta``); None leaves sub-optimality, coverage and Θ error NaN.
    data : PreferenceData
    populations : dict
        Scope ("personalised", "global") → its evaluation population.
    methods : iterable of str
        Keys of :data:`METHODS`.
    rank : int
        r of the low-rank fits.
    c2 : float
        C₂ of the paper's Gram sets ("gram").
    level : float
        Level of the calibrated sets (Wald, credible, …).
    ridge : float
        λ of the frequentist fits.
    n_initial : int, optional
        N₀ of PRS's data split.
    seed : int
        The posterior's random seed.
    posterior : dict, optional
        :func:`~bayes_loco.bayes.fit_posterior`'s settings, e.g. ``{"nuts":
        {"sampler": "numpyro"}, "prior": {"scale": 2}}``, over
        :data:`POSTERIOR_DEFAULTS` group by group. The posterior starts at (and
        in the RTV coordinates of) PRS's low-rank fit.
    fits : dict, optional
        Fits to reuse, by :data:`FITTERS` kind (``{"posterior": post, "prs": prs}``).
    columns : iterable of str
        Keys of :data:`EXTRA_COLUMNS` to add to every row (a study's ``columns``).

    Returns
    -------
    list of dict
        Rows with the :data:`COLUMNS`. ``covered`` is whether θ* (in the set's
        coordinates: θ*_rtv for PRS and the posterior, vec Θ* for the MLE) lies
        in the method's set (NaN for sets that bound values, not θ: value-sized
        and CVaR); ``value_covered`` whether the policy's true value relative
        to the reference action is at least its pessimistic value; ``c_star``
        the optimal policy's ‖m(π*)‖_W⁻¹ in an ellipsoid's metric. Every row
        carries its fit's largest R-hat and divergences (NaN for the
        optimisers), and a NUTS posterior's rows ``chart_rank``, the r₁ of
        its parametrisation (0: factored). The methods of one fit share it.

    Examples
    --------
    >>> from bayes_loco import experiments as ex
    >>> rows = ex.run_methods(problem, data, {"personalised": pop}, ["MLE-Greedy", "PRS-exact-Wald"], rank=2)
    >>> [(row["method"], round(row["suboptimality"], 3)) for row in rows]
    [('MLE-Greedy', 0.063), ('PRS-exact-Wald', 0.057)]
    """
    methods = _check_methods(methods)
    columns = tuple(columns)
    unknown = [c for c in columns if c not in EXTRA_COLUMNS]
    if unknown:
        raise ValueError(f"columns: unknown columns {unknown}; known: {', '.join(EXTRA_COLUMNS)}")
    theta_star = None if truth is None else truth_theta(truth, data.d_x, data.d_phi)
    shared = Fits(data, rank=rank, ridge=ridge, n_initial=n_initial, seed=seed, posterior=posterior,
                  given=_check_fits(fits, rank))
    return [row for name in methods
            for row in _method_rows(name, shared, populations, theta_star, c2=c2, level=level,
                                    columns=columns)]


def _check_fits(fits: Mapping | None, rank: int) -> dict:
    fits = dict(fits or {})
    for kind, fit in fits.items():
        if kind not in FITTERS:
            raise ValueError(f"fits: unknown kind {kind!r}; known: {', '.join(FITTERS)}")
        if not isinstance(fit, Fit):
            raise TypeError(f"fits[{kind!r}] must be a fit (bayes_loco.Fit), got {type(fit).__name__}")
        if FITTERS[kind].at_rank and fit.rank != rank:
            raise ValueError(f"fits[{kind!r}] has rank {fit.rank}, but rank={rank} was asked for")
    return fits


@checks_data
def compare_policies(data: PreferenceData, population: Population, *, rank: int, truth=None,
                     methods: Iterable[str] = COMPARE_METHODS, fits: Mapping[str, Fit] | None = None,
                     level: float = LEVEL, c2: float = 5.0, ridge: float = 0.0, scope: str = "personalised",
                     posterior: Mapping | None = None, seed: int = 0) -> pd.DataFrame:
    """Every method's policy on ``population`` through the one solver: a tidy table, one row per method.

    The same methods, fits, sets and rows as the studies (:func:`run_methods`),
    on your data: by default the paper's PRS set (C₂, relaxed and exact), the
    ``level`` Wald set, the low-rank fit's greedy policy and the posterior's
    greedy policy and sets (credible ellipsoid, sandwich, hull of draws,
    pointwise quantile, CVaR), each with the objectives it allows.

    Parameters
    ----------
    data : PreferenceData
    population : Population
        The evaluation population ρ.
    rank : int
        r.
    truth : Problem or ndarray, optional
        The true Θ* (or anything with ``.theta``), needed for
        ``suboptimality``, ``covered`` (whether θ* lies in the set, in its
        coordinates), ``truth_distance`` and ``theta_error``; NaN without it.
    methods : sequence of str
        Keys of :data:`METHODS` (default :data:`COMPARE_METHODS`).
    fits : dict, optional
        Fits of ``data`` to reuse, by kind: ``{"posterior": post, "prs": prs}``
        (kinds: :data:`FITTERS`). The others are fitted here; a posterior
        fitted here starts at (and lives in the RTV coordinates of) PRS's
        low-rank fit.
    level : float
        Level of the Wald and credible sets.
    c2 : float
        C₂ of the paper's Gram sets.
    ridge : float
        λ of the frequentist fits made here.
    scope : {"personalised", "global"}
    posterior : dict, optional
        :func:`~bayes_loco.bayes.fit_posterior`'s settings when the posterior is
        fitted here, e.g. ``{"nuts": {"draws": 1000, "sampler": "pymc"}}``
        (over :data:`POSTERIOR_DEFAULTS`).
    seed : int
        The posterior's random seed when it is fitted here.

    Returns
    -------
    PolicyTable
        A pandas DataFrame with the :data:`COLUMNS`, key columns first
        (:data:`COMPARE_COLUMNS`): ``method, suboptimality, pessimistic_value,
        covered, value_covered, fit, set_kind, level, objective, scope,
        relative_gap, truth_distance, radius, k_eff, c_star, theta_error,
        fit_seconds, policy_seconds, selected_rank, max_rhat, divergences,
        chart_rank``. Printed, it shows the first five and names the others
        (:class:`PolicyTable`); ``table.to_string()`` prints them all.

    Raises
    ------
    ValueError
        An unknown method or fit kind, a fit of another rank, a truth of the
        wrong shape, a bad scope or level; the message names the argument.

    Examples
    --------
    The default methods include a NUTS posterior of the data (about 4 minutes at the paper's
    size on two cores); the frequentist ones take a second:

    >>> from bayes_loco import experiments as ex
    >>> table = ex.compare_policies(data, pop, rank=2, truth=problem, methods=["PRS", "PRS-exact-Wald"],
    ...                             ridge=1.0)
    >>> table[["method", "suboptimality", "covered"]].round(3)
               method  suboptimality  covered
    0             PRS          0.064      0.0
    1  PRS-exact-Wald          0.057      1.0
    """
    if not isinstance(population, Population):
        raise TypeError(f"population must be a Population, got {type(population).__name__}")
    check_option(scope, "scope", SCOPES)
    level = check_level(level)
    c2 = check_real(c2, "c2", 0.0)
    rows = run_methods(truth, data, {scope: population}, methods, rank=rank, c2=c2, level=level, ridge=ridge,
                       seed=seed, posterior=posterior, fits=fits)
    return PolicyTable(rows, columns=COMPARE_COLUMNS)
