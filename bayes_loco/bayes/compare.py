"""Posterior credible sets against PRS, through the one pessimistic solver.

:func:`compare_policies` runs the paper's PRS ellipsoid (Gram W, C₂), the
calibrated Wald set and the posterior's credible sets through
:func:`bayes_loco.pessimistic_policy` with each objective where the set allows
it, and returns a tidy table.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import pandas as pd

from .._validation import check_option, check_real
from ..data import Population, PreferenceData
from ..evaluate import suboptimality
from ..exceptions import BayesLocoWarning
from ..frequentist.prs import fit_prs
from ..policy import OBJECTIVES, SCOPES, greedy_policy, pessimistic_policy
from ..sets import DrawsSet, EllipsoidSet
from .credible import KINDS
from .fit import Posterior, fit_posterior

COLUMNS = ["method", "set_kind", "level", "objective", "scope", "suboptimality", "covered",
           "pessimistic_value", "relative_gap", "fit_seconds", "seconds"]


def _truth_theta(truth, data):
    if truth is None:
        return None
    theta = np.asarray(getattr(truth, "theta", truth), dtype=float)
    if theta.shape != (data.d_x, data.d_phi):
        raise ValueError(f"truth's Θ must have shape ({data.d_x}, {data.d_phi}), got {theta.shape}")
    return theta


def _covered(uset, truth_rtv):
    if truth_rtv is None or not isinstance(uset, EllipsoidSet | DrawsSet):
        return np.nan
    return float(np.all(uset.contains(truth_rtv)))


def compare_policies(data: PreferenceData, population: Population, *, rank: int, truth=None,
                     posterior: Posterior | None = None, levels=(0.9,), kinds=KINDS,
                     objectives=OBJECTIVES, scope: str = "personalised", c2: float = 5.0,
                     ridge: float = 0.0, include_greedy: bool = True,
                     fit_kwargs: dict | None = None) -> pd.DataFrame:
    """One row per method × set kind × level × objective: sub-optimality, coverage and seconds.

    Methods: ``"PRS"`` (the paper's Gram-W ellipsoid with C₂; a tuned penalty,
    level NaN), ``"PRS-Wald"`` (Fisher-information ellipsoid at each level),
    ``"Posterior"`` (credible sets of ``kinds`` at each level), and with
    ``include_greedy`` the greedy policies of the low-rank fit and of the
    posterior mean of Θ. The quantile set is not convex and gets the relaxed
    objective only.

    Parameters
    ----------
    data : PreferenceData
    population : Population
        The evaluation population ρ.
    rank : int
        r.
    truth : PaperProblem or ndarray, optional
        The true Θ* (or an object with ``.theta``). Needed for
        ``suboptimality`` and ``covered`` (whether θ*_rtv lies in the set);
        both are NaN without it.
    posterior : Posterior, optional
        A fit of ``data`` to reuse; otherwise fitted here by
        :func:`~bayes_loco.bayes.fit_posterior` with ``fit_kwargs``, started at
        (and in the RTV coordinates of) PRS's low-rank fit so that every set
        lives in the same coordinates.
    levels : sequence of float
        Credible / confidence levels.
    kinds : sequence of {"ellipsoid", "draws", "quantile"}
    objectives : sequence of {"relaxed", "exact"}
    scope : {"personalised", "global"}
    c2 : float
        C₂ of the paper's PRS set.
    ridge : float
        λ of the frequentist fits.
    include_greedy : bool
    fit_kwargs : dict, optional
        Arguments of :func:`~bayes_loco.bayes.fit_posterior` when ``posterior`` is None.

    Returns
    -------
    pandas.DataFrame
        Columns ``method, set_kind, level, objective, scope, suboptimality,
        covered, pessimistic_value, relative_gap, fit_seconds, seconds``
        (``seconds``: building the set and solving the policy).
    """
    if not isinstance(data, PreferenceData):
        raise TypeError(f"data must be a PreferenceData, got {type(data).__name__}")
    if not isinstance(population, Population):
        raise TypeError(f"population must be a Population, got {type(population).__name__}")
    for kind in kinds:
        check_option(kind, "kinds", KINDS)
    for objective in objectives:
        check_option(objective, "objectives", OBJECTIVES)
    check_option(scope, "scope", SCOPES)
    levels = [check_real(level, "levels", 0.0, 1.0, low_open=True, high_open=True) for level in levels]
    if not levels:
        raise ValueError("levels must hold at least one level")
    theta_star = _truth_theta(truth, data)

    t0 = time.perf_counter()
    prs = fit_prs(data, rank, c2=c2, ridge=ridge)
    prs_seconds = time.perf_counter() - t0
    if posterior is None:
        kwargs = {"progressbar": False, **(fit_kwargs or {})}
        kwargs.setdefault("initial", prs.low_rank)
        posterior = fit_posterior(data, rank, **kwargs)
    elif not isinstance(posterior, Posterior):
        raise TypeError(f"posterior must be a Posterior, got {type(posterior).__name__}")
    elif posterior.rank != rank:
        raise ValueError(f"posterior has rank {posterior.rank}, but rank={rank} was asked for")
    post_seconds = posterior.diagnostics.seconds

    rows = []

    def add(method, set_kind, level, objective, make_set, fit_seconds):
        start = time.perf_counter()
        uset = make_set()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", BayesLocoWarning)
            policy = pessimistic_policy(uset, population, objective=objective, scope=scope)
        truth_rtv = None if theta_star is None else uset.coordinates.to_coordinates(theta_star)
        rows.append(dict(
            method=method, set_kind=set_kind, level=level, objective=objective, scope=scope,
            suboptimality=np.nan if theta_star is None else suboptimality(policy, theta_star, population),
            covered=_covered(uset, truth_rtv), pessimistic_value=policy.pessimistic_value,
            relative_gap=np.nan if policy.certificate is None else policy.certificate.relative_gap,
            fit_seconds=fit_seconds, seconds=time.perf_counter() - start))

    for objective in objectives:
        add("PRS", "gram", np.nan, objective, lambda: prs.uncertainty_set, prs_seconds)
        for level in levels:
            add("PRS-Wald", "wald", level, objective, lambda level=level: prs.confidence_set(level),
                prs_seconds)
    for kind in kinds:
        for level in levels:
            for objective in objectives:
                if kind == "quantile" and objective == "exact":
                    continue
                add("Posterior", kind, level, objective,
                    lambda kind=kind, level=level: posterior.credible_set(level, kind), post_seconds)
    if include_greedy:
        for method, theta, secs in (("LowRank-Greedy", prs.low_rank.theta, prs_seconds),
                                    ("Posterior-mean-Greedy", posterior.theta_mean, post_seconds)):
            start = time.perf_counter()
            policy = greedy_policy(theta, population, scope=scope)
            rows.append(dict(
                method=method, set_kind="none", level=np.nan, objective="greedy", scope=scope,
                suboptimality=np.nan if theta_star is None else suboptimality(policy, theta_star,
                                                                                population),
                covered=np.nan, pessimistic_value=np.nan, relative_gap=np.nan, fit_seconds=secs,
                seconds=time.perf_counter() - start))
    return pd.DataFrame(rows, columns=COLUMNS)
