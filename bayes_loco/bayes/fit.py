"""Posterior fits of the factored model: MAP, NUTS and ADVI, all started at the frequentist fit.

The start matters (docs/design.md, conventions 5 and 6): U = V = 0 is a saddle of
the factored posterior, and chains started elsewhere than near the MLE's rank-r
SVD did not agree at large N. Every method here starts from the balanced factors
of :func:`bayes_loco.fit_low_rank` and diagnoses only identified quantities (Θ
and θ_rtv in the RTV coordinates of a fixed basis, and ν).

:func:`fit_posterior` reads as its stages: resolve the settings (:func:`_resolve`),
then per attempt build the model, sample (:mod:`.samplers`, :mod:`.laplace`),
arrange the tree (:mod:`.layout`) and diagnose it (:mod:`.diagnostics`), and last
record the settings that ran in the :class:`~.posterior.Posterior`. The settings
groups (:class:`Prior`, :class:`NUTS`, :class:`MAP`, :class:`VI`) are in
:mod:`.settings`.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import warnings
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd
import pymc as pm
import xarray as xr

from .._checks import checks_data
from .._validation import check_int, check_option, check_rank, check_real
from .._version import __version__
from ..coordinates import RTVBasis, rtv_basis
from ..data import PreferenceData
from ..design import identified_directions
from ..exceptions import ConvergenceWarning, SamplerWarning
from ..frequentist.fgd import LowRankResult
from ..linalg import range_basis
from ..model import Ties, check_ties
from ..results import Diagnostics
from .chart import build_chart_model
from .diagnostics import (
    diagnostic_table,
    geometry_record,
    leapfrog_steps,
    map_diagnostics,
    note_loose,
    note_separated,
    nuts_diagnostics,
    ranking,
    short_of_ess,
    stopped_diagnostics,
    troubled,
    vi_diagnostics,
)
from .geometry import (
    Geometry,
    advised_target,
    check_user_start,
    choose_geometry,
    default_start,
    divergence_has_fallback,
    fallbacks,
    ridge_chart,
    separated_start,
    watch_for,
)
from .laplace import find_map, laplace_theta
from .layout import arrange, root_attrs
from .model import balanced_factors, build_model
from .nullspace import NULL_STREAM, draw_null, exact_null, redraw_off_spans
from .plan import DEEP_WARMUP, FIRST, SHORT_ESS, attempt, plan_record, trouble
from .posterior import Posterior
from .samplers import (
    Completion,
    exact_arithmetic,
    factor_start,
    final_loss,
    fit_vi,
    model_key,
    quiet_pymc,
    reads_distinct_rows,
    resolve_sampler,
    sample_nuts,
)
from .settings import MAP, METHODS, NUTS, VI, Prior, prior_record, settings_group
from .ties import tie_prior, tie_record
from .watch import DeepWarmup, Diverged, Watch
from .whitening import chart_start

# Each NUTS run's start and end at INFO: a default fit may run several (docs/design.md, "The chart
# parametrisation"), and a user waiting on one at N = 100,000 (minutes a run) can see which run and why.
_LOG = logging.getLogger(__name__)

__all__ = ["fit_posterior"]


@checks_data
def fit_posterior(data: PreferenceData, rank: int, *, method: str = "nuts", ties: Ties = "half",
                  prior: Prior | dict | None = None,
                  nuts: NUTS | dict | None = None, map: MAP | dict | None = None,
                  vi: VI | dict | None = None, start: LowRankResult | None = None,
                  basis: RTVBasis | LowRankResult | None = None, ridge: float = 0.0, random_seed: int = 0,
                  predictive_draws: int = 500, progressbar: bool = True) -> Posterior:
    """Posterior of Θ = U Vᵀ under the factored model, with θ_rtv in the DataTree.

    Parameters
    ----------
    data : PreferenceData
    rank : int
        r.
    method : {"nuts", "map", "vi"}
        ``"nuts"``: ``pm.sample``; ``"map"``: ``pm.find_MAP`` (L-BFGS-B), a
        point estimate, with a Laplace approximation at it for the tree;
        ``"vi"``: ADVI, a fast Gaussian approximation in (U, V) whose spread is
        typically too small (mean-field ignores the posterior correlations of U
        and V).
    ties : {"half", "davidson"}
        The likelihood of ties and weights (:mod:`bayes_loco.bayes.ties`): a tie half
        a win each way, or Davidson's model with ν (prior: ``prior.nu_scale``).
    prior, nuts, map, vi : Prior, NUTS, MAP, VI, a dict of their fields, or None
        The settings groups (None: the defaults): the prior of
        :func:`~bayes_loco.bayes.build_model`, and the settings of NUTS, MAP and
        VI (each used by its method only), e.g. ``nuts={"draws": 500,
        "chains": 4, "sampler": "numpyro"}``.
    start : LowRankResult, optional
        The frequentist low-rank fit to start from (fitted here if not given,
        with ``ridge`` and ``ties``; one given must have this fit's ``ties``). Every chain,
        the MAP search and ADVI start at its balanced factors U₀ = P S^½, V₀ = Q S^½,
        never at the origin.
    basis : RTVBasis or LowRankResult, optional
        The RTV coordinates of θ_rtv (a LowRankResult gives its own); the
        start's by default.
    ridge : float
        λ of the frequentist start when it is fitted here (a small ridge helps
        when rarely compared actions are separable).
    random_seed : int
        Seeds the sampler, the optimiser, the per-chain jitter, and the prior,
        Laplace and predictive draws.
    predictive_draws : int
        Posterior draws (evenly spaced within each chain) for the tree's
        ``posterior_predictive`` and ``preference_probability`` groups, and the
        number of ``prior`` draws; capped so that N × draws stays within
        ``config["max_predictive_values"]``. 0 leaves the
        three groups out.
    progressbar : bool
        PyMC's progress bars and log lines; False silences both.

    Returns
    -------
    Posterior
        Its ``settings`` (and, as JSON, its tree's ``attrs["settings"]``) record
        the settings, with the NUTS sampler that ran. Its ``tree`` is laid out
        as :mod:`bayes_loco.bayes.layout` describes.

    Notes
    -----
    MAP. The tree's ``posterior`` holds ``map.draws`` draws of the Laplace
    approximation at the MAP (:func:`laplace_theta`: a Gaussian on the tangent
    space of the rank-r matrices there, with the curvature of likelihood and
    prior), so ``az.summary`` gives intervals, not NaN; the MAP itself is the
    ``point_estimate`` group, and ``Posterior.theta``/``estimate`` read it.
    The package's sets of a MAP fit are built from the Laplace draws.

    VI. The draws are independent draws from one fitted approximation: one
    chain (``chains`` of ``nuts`` does not apply), so R-hat is undefined; the
    loss of every iteration is the ``vi_loss`` group.

    Warns
    -----
    SamplerWarning
        NUTS diverged or mixed poorly (see :class:`NUTS`); the message names the
        worst quantity. ConvergenceWarning: the MAP search did not converge.

    Examples
    --------
    The default, NUTS with nutpie, 4 chains × (1000 + 1000): about 30 s at N = 1,000 and
    1.5 minutes at N = 10,000 on two cores (docs/results/posterior.md). A MAP fit with
    Laplace draws takes seconds:

    >>> post = bl.bayes.fit_posterior(data, rank=2, method="map", random_seed=0, progressbar=False)
    >>> post.method, post.k, post.k_eff
    ('map', 16, 8)

    The default NUTS fit, and one of PyMC's own sampler (no compilation wait) too short
    for the ESS bar, which the default runs longer once and then warns about
    (``SamplerWarning``) with advice in ``post.advice`` (not run here: 30 s and more):

    >>> post = bl.bayes.fit_posterior(data, rank=2)  # doctest: +SKIP
    >>> short = bl.bayes.fit_posterior(data, rank=2, nuts={"sampler": "pymc", "draws": 200, "tune": 200,
    ...                                                    "chains": 2})  # doctest: +SKIP
    """
    with exact_arithmetic():  # every model of the fit, so that a seed draws the same on any run (.samplers)
        run, group, start_note = _resolve(data, rank, method, ties, prior, nuts, map, vi, start, basis, ridge,
                                          random_seed, predictive_draws, progressbar)
        if method == "nuts":
            attempt, record = _nuts(run, group, start_note)
        else:
            attempt, record = _optimise(run, method, group), ({"start": start_note} if start_note else {})
        post = _record(run, method, attempt, record)
    category = ConvergenceWarning if method == "map" else SamplerWarning
    for message in post.diagnostics.warnings:
        warnings.warn(f"fit_posterior: {message}", category, stacklevel=3)
    return post


@dataclass(frozen=True)
class _Run:
    """What every attempt of one :func:`fit_posterior` call shares: data, prior, start, basis, seeds."""

    data: PreferenceData
    rank: int
    ties: Ties
    prior: Prior
    basis: RTVBasis
    directions: np.ndarray
    predictive_draws: int
    seed: int
    progressbar: bool
    start: LowRankResult
    ridge: float

    @cached_property
    def spans(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(P, P⊥, Q, Q⊥): the contexts' and the differences' spans and their complements, once per fit."""
        return (*range_basis(self.data.contexts), *range_basis(self.data.differences))

    def settings(self, method: str, group) -> dict:
        """The settings record of a fit by ``method`` with its settings group ``group``."""
        return {"rank": self.rank, "method": method, "prior": prior_record(self.prior), "ridge": self.ridge,
                "random_seed": self.seed, "predictive_draws": self.predictive_draws,
                method: dataclasses.asdict(group), **tie_record(self.data, self.ties)}

    def arrange(self, raw: xr.DataTree, method: str, laplace=None, loss=None) -> xr.DataTree:
        """The tree of :mod:`.layout` from PyMC's; its root attrs are written by :func:`_record`."""
        return arrange(raw, method=method, basis=self.basis, directions=self.directions, data=self.data,
                       ties=self.ties, prior=self.prior, predictive_draws=self.predictive_draws,
                       seed=self.seed, laplace=laplace, loss=loss)


@dataclass(frozen=True)
class _Attempt:
    """One run of a method, arranged and diagnosed: what :func:`_record` turns into a Posterior.

    ``group`` is the settings group that ran (NUTS with the parametrisation that ran),
    ``facts`` the tree's (sampler, chains, draws, representation), ``advice`` the
    NUTS settings to re-run with, ``table`` NUTS's R-hat and ESS per entry (kept for a
    re-diagnosis after the fall-back), ``draws_scale`` the geometry's scale of the draws
    (:func:`~.diagnostics.nuts_diagnostics`). ``tree`` is None for a NUTS run stopped at its first divergence
    (:class:`~.watch.Diverged`), which is never kept.
    """

    tree: xr.DataTree | None
    diagnostics: Diagnostics
    model: pm.Model
    group: NUTS | MAP | VI
    facts: tuple[str, int, int, str]
    advice: dict
    final_loss: float | None = None
    table: pd.DataFrame | None = None
    draws_scale: float = 1.0


def _resolve(data, rank, method, ties, prior, nuts, map_settings, vi, start, basis, ridge, random_seed,
             predictive_draws, progressbar) -> tuple[_Run, NUTS | MAP | VI, str]:
    """Stage 1: the checked settings, start and basis; the method's settings group; the start's note."""
    rank = check_rank(rank, data.d_x, data.d_phi)
    check_option(method, "method", METHODS)
    ties = check_ties(ties)
    prior = tie_prior(settings_group(prior, Prior, "prior"), ties)
    nuts = settings_group(nuts, NUTS, "nuts")
    map_settings = settings_group(map_settings, MAP, "map")
    vi = settings_group(vi, VI, "vi")
    ridge = check_real(ridge, "ridge", 0.0)
    random_seed = check_int(random_seed, "random_seed", 0)
    predictive_draws = check_int(predictive_draws, "predictive_draws", 0)
    if not isinstance(progressbar, bool):
        raise TypeError(f"progressbar must be a bool, got {progressbar!r}")
    if method == "nuts":
        nuts = resolve_sampler(nuts, data.n)
    start, start_ridge, start_note = _start_fit(data, rank, start, ridge, prior.scale, ties)
    basis = _resolve_basis(basis, start, rank, data)
    run = _Run(data, rank, ties, prior, basis, identified_directions(basis, data), predictive_draws,
               random_seed, progressbar, start, start_ridge)
    return run, {"nuts": nuts, "map": map_settings, "vi": vi}[method], start_note


def _start_fit(data, rank, start, ridge, scale, ties) -> tuple[LowRankResult, float, str]:
    """The start of every chain, the ridge it was fitted with, and a note where that is not ``ridge``.

    :func:`~.geometry.default_start` with the fit's own ``ties`` when none is given.
    """
    if start is None:
        return default_start(data, rank, ridge, scale, ties)
    if not isinstance(start, LowRankResult):
        raise TypeError(f"start must be a LowRankResult, got {type(start).__name__}")
    if start.rank != rank or start.theta.shape != (data.d_x, data.d_phi):
        raise ValueError(f"start has rank {start.rank} and Θ of shape {start.theta.shape}; "
                         f"expected rank {rank} and ({data.d_x}, {data.d_phi})")
    if start.ties != ties:  # as fit_low_rank refuses an initial fit of the other tie model
        raise ValueError(f"start was fitted with ties={start.ties!r}, this fit has ties={ties!r}: pass "
                         f"fit_low_rank(data, {rank}, ties={ties!r}) or no start")
    check_user_start(start, data, scale)
    return start, ridge, ""


def _resolve_basis(basis, start, rank, data) -> RTVBasis:
    if basis is None:
        return rtv_basis(start.theta, rank)
    if isinstance(basis, LowRankResult):
        return rtv_basis(basis.theta, rank)
    if isinstance(basis, RTVBasis):
        if (basis.rank, basis.d_x, basis.d_phi) != (rank, data.d_x, data.d_phi):
            raise ValueError(f"basis has rank {basis.rank} and (d_x, d_phi) = ({basis.d_x}, {basis.d_phi}); "
                             f"expected rank {rank} and ({data.d_x}, {data.d_phi})")
        return basis
    raise TypeError(f"basis must be an RTVBasis, a LowRankResult or None, got {type(basis).__name__}")


def _nuts(run: _Run, nuts: NUTS, start_note: str) -> tuple[_Attempt, dict]:
    """NUTS in the coordinates :func:`~.geometry.choose_geometry` picks, and its fall-back (:mod:`.geometry`).

    Returns the attempt kept and the record of what ran and why (``geometry``, and ``advice``).
    A user's own plan (``nuts.plan``) runs instead of the automatic one (:func:`_users_plan`).
    """
    if nuts.plan is not None:
        return _users_plan(run, nuts, start_note)
    geometry = choose_geometry(run.data, run.rank, run.start.theta, run.prior.scale, nuts.parametrization,
                               nuts.chart_rank)
    # Built once, its reason ("; r₁ of r components determined") completed if the watch stops the run.
    chart = ridge_chart(geometry, run.data, run.prior.scale, "") if nuts.sampler == "nutpie" else None
    stopped, t0 = {}, time.perf_counter()
    planned = [attempt(geometry, nuts)]
    try:
        runs = [_nuts_attempt(run, geometry, nuts, None if chart is None else watch_for(chart))]
    except DeepWarmup as stop:
        stopped = {"parametrization": geometry.parametrization, "warmup_depth": stop.depth,
                   "projected_seconds": stop.remaining, "seconds": time.perf_counter() - t0}
        geometry = dataclasses.replace(chart, reason=f"the factored model's {stop}, and was stopped there "
                                                     f"after {stopped['seconds']:.0f} s{chart.reason}")
        stopped["attempt"] = planned.pop().record()  # it left no draws to keep
        planned = [attempt(geometry, nuts, DEEP_WARMUP)]
        runs = [_nuts_attempt(run, geometry, nuts)]
        if short_of_ess(runs[0].diagnostics, nuts):
            # A chart the user did not ask for, short of ESS alone, follows its advice (strangers 9604 #0:
            # ESS 342 in 87 s; lengthened, 627 in 73 s, where the factored model's fall-back took 339 s).
            longer = dataclasses.replace(geometry, lengthened=True)
            planned.append(attempt(longer, nuts, SHORT_ESS))
            runs.append(_nuts_attempt(run, longer, nuts))
    pending = fallbacks(geometry, run.data, run.prior.scale, nuts, lambda: runs[-1].diagnostics)
    while troubled(runs[-1].diagnostics, nuts.rhat_max) and (following := next(pending, None)) is not None:
        planned.append(attempt(following, nuts, trouble(runs[-1].diagnostics, nuts.rhat_max)))
        runs.append(_nuts_attempt(run, following, nuts))
    return _keep(nuts, geometry, planned, runs, start_note, stopped)


def _users_plan(run: _Run, nuts: NUTS, start_note: str) -> tuple[_Attempt, dict]:
    """The user's plan: each entry of ``nuts.plan`` in turn, in the coordinates it names, until one run
    neither diverges nor misses R-hat; no automatic fall-back. Kept and recorded as :func:`_nuts` does."""
    planned, runs, geometry = [], [], None
    for entry in nuts.plan:
        settings = nuts.attempt(entry)
        # An "auto" entry takes the coordinates the data determine, but no fall-back: the plan is the user's.
        geometry = dataclasses.replace(choose_geometry(run.data, run.rank, run.start.theta, run.prior.scale,
                                                       settings.parametrization, settings.chart_rank),
                                       automatic=False)
        when = FIRST if not runs else trouble(runs[-1].diagnostics, nuts.rhat_max)
        planned.append(attempt(geometry, settings, when))
        runs.append(_nuts_attempt(run, geometry, settings))
        if not troubled(runs[-1].diagnostics, nuts.rhat_max):
            break
    return _keep(nuts, dataclasses.replace(geometry, reason="nuts.plan: the user's own plan"), planned, runs,
                 start_note, {})


def _keep(nuts: NUTS, geometry: Geometry, planned: list, runs: list[_Attempt], start_note: str,
          stopped: dict) -> tuple[_Attempt, dict]:
    """The best of ``runs`` (:func:`~.diagnostics.ranking`), re-advised where others ran after it, and the
    record of the plan (``planned``, one attempt per run) and of the geometry."""
    facts = [(a.group, a.diagnostics, np.nan if a.tree is None else leapfrog_steps(a.tree)) for a in runs]
    ended = [i for i, done in enumerate(runs) if done.tree is not None]  # the last run always is
    best = max(ended, key=lambda i: ranking(facts[i][1], nuts.rhat_max, facts[i][2], nuts.ess_min))
    kept = runs[best]
    if len(runs) > 1 and kept.advice:
        # Advised before the runs after it: what the fall-back ran since is no advice.
        tried = tuple(attempt.group for attempt in runs)
        diagnostics, advice = nuts_diagnostics(kept.tree, kept.group, kept.diagnostics.seconds, tried=tried,
                                               table=kept.table, draws_scale=kept.draws_scale)
        kept = dataclasses.replace(kept, diagnostics=diagnostics, advice=advice)
    kept = dataclasses.replace(kept, diagnostics=note_separated(kept.diagnostics, separated_start(start_note),
                                                                nuts.rhat_max))
    record = {"geometry": geometry_record(geometry, kept.group, facts if len(runs) > 1 else [], start_note),
              "plan": plan_record(planned, [done.diagnostics for done in runs], best,
                                  stopped.pop("attempt", None))}
    if stopped:
        record["geometry"]["stopped"] = stopped
    if kept.advice:
        record["advice"] = kept.advice
    return kept, record


def _nuts_attempt(run: _Run, geometry: Geometry, nuts: NUTS, watch: Watch | None = None) -> _Attempt:
    """One NUTS run in ``geometry``'s coordinates: build the model, sample, arrange the tree, diagnose.

    With ``watch``, nutpie's warm-up is watched (:class:`~.watch.DeepWarmup`). A nutpie run whose
    divergence another run would follow (:func:`~.geometry.divergence_has_fallback`) is stopped at its
    first (:class:`~.watch.Diverged`): its attempt has no tree, and its diagnostics say so.
    """
    if nuts.sampler == "nutpie" and divergence_has_fallback(geometry, nuts):
        watch = dataclasses.replace(watch or Watch(), divergence=True)
    nuts = attempt(geometry, nuts).settings(nuts)  # the attempt's own settings: the user's are not changed
    frame, prior, grouped = geometry.frame, run.prior, reads_distinct_rows(nuts)
    chart = "" if frame is None else f" r₁ = {geometry.chart_rank}"
    _LOG.info("NUTS run starts: %s%s, target_accept %g, %d × (%d + %d) with %s; %s", geometry.parametrization,
              chart, nuts.target_accept, nuts.chains, nuts.tune, nuts.draws, nuts.sampler, geometry.reason)
    model, sampled, complete = _sampled_models(run, frame, grouped)
    if frame is not None:

        def draw_start(rng):
            start = chart_start(frame, nuts.init_jitter, rng, prior.scale)
            return {name: value for name, value in start.items() if name in sampled.named_vars}
    else:
        u0, v0 = balanced_factors(run.start.theta, run.rank)

        def draw_start(rng):
            return factor_start(u0, v0, nuts.init_jitter, rng)
    with quiet_pymc(not run.progressbar):
        t0 = time.perf_counter()
        try:
            raw = sample_nuts(sampled, nuts, draw_start, run.seed, run.progressbar,
                              model_key(sampled, frame, prior), watch, complete)
        except Diverged as stop:
            _LOG.info("NUTS run stopped: %s", stop)
            facts = (nuts.sampler, nuts.chains, 0, "none: stopped at its first divergence")
            return _Attempt(None, stopped_diagnostics(nuts, stop), model, nuts, facts, {})
        seconds = time.perf_counter() - t0
    tree = run.arrange(raw, "nuts")
    table = diagnostic_table(tree)
    advised = advised_target(geometry, run.data.n_comparisons)
    diagnostics, advice = nuts_diagnostics(tree, nuts, seconds, advised, table=table,
                                           draws_scale=geometry.draws_scale)
    _LOG.info("NUTS run ends after %.0f s: %s divergences, max R-hat %.4f, min ESS %.0f", seconds,
              diagnostics.divergences, diagnostics.max_rhat, diagnostics.min_ess_bulk)
    if diagnostics.warnings and frame is not None and not geometry.automatic:
        diagnostics = note_loose(diagnostics, frame)
    facts = (nuts.sampler, nuts.chains, nuts.draws, "NUTS draws (MCMC)")
    return _Attempt(tree, diagnostics, model, nuts, facts, advice, table=table,
                    draws_scale=geometry.draws_scale)


def _sampled_models(run: _Run, frame, grouped: bool) -> tuple[pm.Model, pm.Model, Completion | None]:
    """(the model fitted, the model NUTS samples, what completes its draws: :func:`~.samplers.sample_nuts`).

    Where U_⊥ and V_⊥ can be drawn exactly (:func:`~.nullspace.exact_null`) they are, from a stream
    of their own (:mod:`.nullspace`): a full chart's NUTS samples the spans' blocks alone, a partial
    chart's and the factored model's draws of them are replaced.
    """
    prior, rng = run.prior, np.random.default_rng([run.seed, NULL_STREAM])
    if frame is None:
        model = build_model(run.data, run.rank, prior=prior, ties=run.ties, group_rows=grouped)
        left, left_null, right, right_null = run.spans
        if not exact_null(left_null, right_null, prior):
            return model, model, None
        return model, model, (model, lambda draws: redraw_off_spans(draws, left, right, prior, rng))
    model = build_chart_model(run.data, run.rank, frame, prior=prior, ties=run.ties, group_rows=grouped)
    if not exact_null(*frame.nulls, prior):
        return model, model, None
    sampled = model if frame.weak_rank else build_chart_model(
        run.data, run.rank, frame, prior=prior, ties=run.ties, group_rows=grouped, span_only=True)
    return model, sampled, (model, lambda draws: draw_null(draws, frame, prior, rng))


def _optimise(run: _Run, method: str, group: MAP | VI) -> _Attempt:
    """A MAP (with its Laplace draws) or VI fit from the start's balanced factors, arranged and diagnosed."""
    model = build_model(run.data, run.rank, prior=run.prior, ties=run.ties, group_rows=True)
    u0, v0 = balanced_factors(run.start.theta, run.rank)
    laplace, loss = None, None
    with quiet_pymc(not run.progressbar):
        t0 = time.perf_counter()
        if method == "map":
            raw = find_map(model, u0, v0, run.seed, run.progressbar)
        else:
            raw, loss = fit_vi(model, group, u0, v0, run.seed, run.progressbar)
        seconds = time.perf_counter() - t0
        if method == "map":
            laplace = laplace_theta(model, raw, group.draws, run.seed)
    tree = run.arrange(raw, method, laplace=laplace, loss=loss)
    if method == "map":
        return _Attempt(tree, map_diagnostics(tree, seconds), model, group,
                        ("L-BFGS-B", 1, group.draws,
                         "independent draws of the Laplace approximation at the MAP (one chain)"), {})
    loss_end = final_loss(loss)
    facts = (group.method, 1, group.draws, "independent draws of the fitted ADVI approximation (one chain)")
    return _Attempt(tree, vi_diagnostics(group, loss_end, seconds), model, group, facts, {}, loss_end)


def _record(run: _Run, method: str, attempt: _Attempt, record: dict) -> Posterior:
    """The last stage: the settings that ran (with ``record``) on the tree's root and in the Posterior."""
    settings = {**run.settings(method, attempt.group), **record}
    sampler, chains, draws, representation = attempt.facts
    attrs = root_attrs(settings, __version__, sampler=sampler, chains=chains, draws=draws, k=run.basis.dim,
                       k_eff=run.directions.shape[1], representation=representation,
                       predictive_draws=run.predictive_draws)
    if attempt.final_loss is not None:
        attrs["final_loss"] = attempt.final_loss
    attempt.tree.attrs = attrs
    post = Posterior(attempt.tree, run.basis, run.start, run.directions, attempt.diagnostics, method,
                     run.data, settings)
    post.__dict__["model"] = attempt.model  # the fitted model itself fills the cache of Posterior.model
    return post
