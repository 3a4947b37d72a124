"""Diagnostics of a posterior fit: R-hat, ESS and divergences of NUTS, the optimisers' accounts, advice.

Only identified quantities are diagnosed (docs/design.md, convention 6): every entry
of Θ and θ_rtv, and Davidson's ν where the model has it (:mod:`.ties`); U and V are
not (rotations U R, V R give the same Θ). Each problem becomes a message naming the
worst quantity, with the NUTS settings to re-run with (:func:`_advice`); the fit
issues the messages as :class:`~bayes_loco.SamplerWarning` or
:class:`~bayes_loco.ConvergenceWarning`. What ran and why (:mod:`.geometry`) is
recorded by :func:`geometry_record` and read back by :func:`geometry_notes`.
"""

from __future__ import annotations

import dataclasses

import arviz as az
import numpy as np
import pandas as pd

from ..config import get_config
from ..results import Diagnostics, FitStatus
from ..trees import CONSTANT_DATA
from . import dims as D
from .settings import CHART, FACTORED, NUTS, VI
from .watch import Diverged

# Sampler-stat names differ between the NUTS implementations (docs/design.md, 'Samplers').
_DEPTH_STATS = ("tree_depth", "depth")
_MAXDEPTH_STATS = ("reached_max_treedepth", "maxdepth_reached")
_STEP_STATS = ("n_steps", "num_steps", "tree_size")
RTV_IDENTIFIED = f"rtv_{D.IDENTIFIED_COORD}"


def diagnosed_variables(tree) -> tuple[str, ...]:
    """The variables of ``tree``'s ``posterior`` that R-hat and ESS cover: θ_rtv, Θ, and ν where present."""
    return (D.THETA_RTV, D.THETA) + ((D.NU,) if D.NU in tree[D.POSTERIOR].data_vars else ())


def _stat(stats, names):
    """The first of the sampler statistics ``names`` that ``stats`` holds, as an array, or None."""
    for name in names:
        if name in stats.data_vars:
            return np.asarray(stats[name].values)
    return None


def leapfrog_steps(tree) -> float:
    """All chains' leapfrog steps (gradient evaluations) after tuning, from ``sample_stats``; 0 if absent."""
    steps = _stat(tree["sample_stats"], _STEP_STATS) if "sample_stats" in tree.children else None
    return 0.0 if steps is None else float(steps.sum())


def _worst(table: pd.DataFrame, column: str, largest: bool) -> tuple[float, str]:
    """The extreme value of ``column`` (NaN skipped) and the row (quantity) where it occurs."""
    values = table[column].to_numpy(float)
    if np.all(np.isnan(values)):
        return np.nan, ""
    i = int(np.nanargmax(values) if largest else np.nanargmin(values))
    return float(values[i]), str(table.index[i])


def _unidentified_note(name: str, tree) -> str:
    """A remark when ``name`` (an az.summary row) is a θ_rtv coordinate that no comparison reaches."""
    chart = tree[CONSTANT_DATA]
    if RTV_IDENTIFIED not in chart.data_vars:
        return ""
    for label, identified in zip(chart[D.RTV_COORD].values, chart[RTV_IDENTIFIED].values, strict=True):
        if name == f"{D.THETA_RTV}[{label}]" and not identified:
            return " (a coordinate no comparison reaches: its posterior is the prior's)"
    return ""


def _advice(nuts: NUTS, divergences: int | None, rhat_bad: bool, ess_bad: bool,
            chart_target: float | None = None, tried: tuple[NUTS, ...] = (),
            draws_scale: float = 1.0) -> dict:
    """The NUTS settings to re-run with, each a step that improves this fit (empty: none known).

    Divergences in the chart: ``chart_target`` where it is given and above the
    ``target_accept`` that ran (a chart the user named, where the factored model's
    ridge is long: :func:`~.geometry.long_ridge`), else the factored model
    (:mod:`.geometry`), then the factored model at each higher target. Divergences in
    the factored model: the next ``target_accept`` of ``config["target_accept_steps"]``
    above the one that ran (none past the last: smaller steps no longer help). R-hat
    or ESS short: twice the draws (ESS grows about linearly with them), and with R-hat
    twice the tuning too. Each suggestion is computed from the settings that ran, so a
    fit re-run as advised is never advised the same again; ``tried``, the runs of a
    fall-back (:func:`~.geometry.fallbacks`), are skipped too: a step that ran already
    and was not kept is no advice. Where the coordinates that ran draw ``draws_scale`` ×
    the draws asked (a partial chart's ``config["partial_draws"]``), the advised
    draws are divided by it: a re-run in the same coordinates scales them again.
    """
    def key(n: NUTS) -> tuple:
        return n.parametrization, n.chart_rank, round(n.target_accept, 9), n.draws

    def ran(step: dict) -> bool:
        return key(NUTS(**(dataclasses.asdict(nuts) | step))) in {key(r) for r in tried}

    advice = {}
    if divergences:
        higher = [{"target_accept": t} for t in get_config()["target_accept_steps"]
                  if t > nuts.target_accept + 1e-9]
        if nuts.parametrization == CHART:
            # NUTS refuses a chart_rank beside "factored", so the advice drops a named one.
            factored = {"parametrization": FACTORED}
            if nuts.chart_rank is not None:
                factored["chart_rank"] = None
            steps = ([{"target_accept": chart_target}] if chart_target and nuts.target_accept < chart_target
                     - 1e-9 else []) + [factored] + [factored | step for step in higher]
        else:
            steps = higher
        advice = next((step for step in steps if not ran(step)), {})
    if rhat_bad or ess_bad or "target_accept" in advice:
        advice["draws"] = 2 * nuts.draws
    if rhat_bad and not ran(advice | lengthened(nuts)):
        advice.update(lengthened(nuts))
    if "draws" in advice and "parametrization" not in advice:
        # Twice what ran once the re-run's scale applies (1,500 run of 1,000 asked: advised 2,000).
        advice["draws"] = round(advice["draws"] / draws_scale)
    return advice


def lengthened(nuts: NUTS) -> dict:
    """Twice the draws and twice the tuning (at least twice the draws): what chains that disagree need."""
    return {"draws": 2 * nuts.draws, "tune": 2 * max(nuts.tune, nuts.draws)}


def diagnostic_table(tree) -> pd.DataFrame:
    """ArviZ's R-hat and ESS of every entry of the diagnosed variables (:func:`diagnosed_variables`)."""
    return pd.concat([az.summary(tree, var_names=[var], kind="diagnostics", round_to="none")
                      for var in diagnosed_variables(tree)])


def nuts_diagnostics(tree, nuts: NUTS, seconds: float, chart_target: float | None = None,
                     tried: tuple[NUTS, ...] = (), table: pd.DataFrame | None = None,
                     draws_scale: float = 1.0) -> tuple[Diagnostics, dict]:
    """Divergences, tree depth, and R-hat/ESS over Θ, θ_rtv and ν (:func:`diagnosed_variables`); messages.

    The messages name the worst quantity (its ArviZ label); the advice (:func:`_advice`,
    with ``chart_target`` and the fall-back's runs ``tried``) is returned beside the
    diagnostics and written into each message as the exact ``nuts={...}`` to pass.
    ``table`` is the tree's :func:`diagnostic_table` where the caller has it already; ``draws_scale``
    the draws that ran over those asked, where the coordinates scale them (:func:`_advice`).
    """
    stats = tree[D.SAMPLE_STATS]
    div, depth, maxd = (_stat(stats, names) for names in (("diverging",), _DEPTH_STATS, _MAXDEPTH_STATS))
    over = "Θ and θ_rtv" if len(diagnosed_variables(tree)) == 2 else "Θ, θ_rtv and ν"
    both = diagnostic_table(tree) if table is None else table
    divergences = None if div is None else int(div.sum())
    max_rhat, at_rhat = _worst(both, "r_hat", largest=True)
    min_bulk, at_bulk = _worst(both, "ess_bulk", largest=False)
    min_tail, at_tail = _worst(both, "ess_tail", largest=False)
    chains = tree[D.POSTERIOR].sizes.get("chain", 1)
    rhat_bad = chains > 1 and not max_rhat <= nuts.rhat_max
    ess_bad = not min(min_bulk, min_tail) >= nuts.ess_min
    advice = _advice(nuts, divergences, rhat_bad, ess_bad, chart_target, tried, draws_scale)
    rerun = f"; re-run with nuts={advice}" if advice else ""
    messages = []
    if divergences:
        if "parametrization" in advice and chart_target:
            why = (f"they persist at target_accept {nuts.target_accept}; the factored model has no ratio "
                   "coordinates")
        elif "parametrization" in advice:
            why = "the chart's coordinates are ratios that are near-singular where the data are few"
        elif "target_accept" in advice:
            why = f"smaller leapfrog steps (target_accept {advice['target_accept']}) follow the curvature"
        else:
            persist = (f"in each of the fall-back's {len(tried)} runs (settings['geometry'])" if tried else
                       f"at target_accept {nuts.target_accept}")
            why = (f"they persist {persist}: the draws near them may be biased; "
                   "compare a lower rank (select_rank) or a tighter prior (prior={'scale': ...})")
        messages.append(f"{divergences} divergent transitions after tuning in the {nuts.parametrization} "
                        f"coordinates: {why}{rerun}")
    if rhat_bad:
        messages.append(f"max R-hat {max_rhat:.4f} at {at_rhat}{_unidentified_note(at_rhat, tree)} > "
                        f"{nuts.rhat_max} (over {over}): the chains disagree{rerun}")
    if ess_bad and not np.isfinite(min(min_bulk, min_tail)):
        messages.append(f"ESS cannot be estimated from {chains} chain(s) × {nuts.draws} draw(s), so this fit "
                        f"is not checked{rerun}")
    elif ess_bad:
        worst = (f"bulk {min_bulk:.0f} at {at_bulk}{_unidentified_note(at_bulk, tree)}, "
                 f"tail {min_tail:.0f} at {at_tail}{_unidentified_note(at_tail, tree)}")
        messages.append(f"min ESS over {over} is {worst} < {nuts.ess_min}{rerun}")
    converged = not messages
    message = (f"{chains} chains × {nuts.draws} draws after {nuts.tune} tuning steps: {divergences} "
               f"divergences, max R-hat {max_rhat:.4f} ({at_rhat}), min ESS bulk {min_bulk:.0f} "
               f"({at_bulk}) / tail {min_tail:.0f} ({at_tail})")
    diagnostics = Diagnostics(
        f"nuts-{nuts.sampler}", converged, nuts.draws,
        FitStatus.CONVERGED if converged else FitStatus.SAMPLER_WARNINGS, message, tuple(messages), seconds,
        divergences=divergences, max_depth_hits=None if maxd is None else int(maxd.sum()),
        mean_tree_depth=None if depth is None else float(depth.mean()),
        max_rhat=max_rhat, min_ess_bulk=min_bulk, min_ess_tail=min_tail)
    return diagnostics, advice


def stopped_diagnostics(nuts: NUTS, stop: Diverged) -> Diagnostics:
    """The account of a run stopped at its first divergence (``stop``, a :class:`~.watch.Diverged`):
    its divergences and tree depth so far, no R-hat or ESS (NaN)."""
    message = f"stopped at its first divergence after the warm-up: {stop}"
    return Diagnostics(f"nuts-{nuts.sampler}", False, nuts.draws, FitStatus.STOPPED, message, (message,),
                       stop.seconds, divergences=stop.divergences, mean_tree_depth=stop.depth)


def map_diagnostics(tree, seconds: float) -> Diagnostics:
    """The optimiser's own account, from find_MAP's ``optimizer_result`` group."""
    if D.OPTIMIZER_RESULT not in tree.children:
        return Diagnostics("map", True, None, FitStatus.CONVERGED, "find_MAP gave no optimizer_result",
                           seconds=seconds)
    result = tree[D.OPTIMIZER_RESULT]
    success = bool(result["success"].values) if "success" in result.data_vars else True
    n_iter = int(result["nit"].values) if "nit" in result.data_vars else None
    message = str(result["message"].values) if "message" in result.data_vars else ""
    messages = () if success else (
        f"the MAP search (L-BFGS-B) stopped before converging after {n_iter} iterations: {message}",)
    return Diagnostics("map", success, n_iter, FitStatus.CONVERGED if success else FitStatus.NOT_CONVERGED,
                       message, messages, seconds)


def vi_diagnostics(vi: VI, final_loss: float, seconds: float) -> Diagnostics:
    """A VI fit's account: its iterations and final loss (no convergence test of its own)."""
    message = f"{vi.iterations} iterations of {vi.method}, final loss {final_loss:.6g}"
    return Diagnostics(f"vi-{vi.method}", True, vi.iterations, FitStatus.CONVERGED, message, seconds=seconds)


def note_loose(diagnostics: Diagnostics, frame) -> Diagnostics:
    """``diagnostics`` with a warning naming the charted components the data leave loose, if any."""
    charted = frame.angles[:frame.chart_rank]
    loose = ", ".join(f"{j} ({a:.2f} rad)" for j, a in enumerate(charted) if a > get_config()["angle_max"])
    if not loose:
        return diagnostics
    return dataclasses.replace(diagnostics, warnings=(*diagnostics.warnings, (
        f"NUTS ran in the chart although the data leave the column space of component(s) {loose} "
        f"loose (> {get_config()["angle_max"]} rad at the start): their chart coordinates have heavy "
        f"tails. Chart fewer "
        "components (nuts={'chart_rank': ...}; the others stay factored) or none "
        "(nuts={'parametrization': 'auto'} chooses); if a component's singular value is within noise of 0, "
        "a lower rank may fit the data as well (select_rank)")))


def note_separated(diagnostics: Diagnostics, separated: bool, rhat_max: float) -> Diagnostics:
    """``diagnostics`` with a warning where the chains disagree on data whose plain start was separated.

    There only the prior bounds the posterior along the separating directions, and chains can settle
    in different modes that more draws need not join (an unseen rank-2 problem, N = 1,500 rows
    counted 1-6 times: two chains at Θ's entry −0.31 ± 0.15, two at 4.1 ± 1.2, R-hat 1.83, in the
    factored model and the chart alike; with ``prior={"scale": 0.5}`` R-hat 1.004, ESS 539).
    """
    if not separated or diagnostics.max_rhat <= rhat_max:
        return diagnostics
    return dataclasses.replace(diagnostics, warnings=(*diagnostics.warnings, (
        "the chains disagree on data that look separable (the unpenalised start's margins grew without "
        "bound; settings['geometry']['start']): along those directions only the prior bounds the posterior, "
        "and chains can settle in different modes that more draws need not join. A tighter prior "
        "(prior={'scale': ...}) bounds them; a lower rank (select_rank) may fit the data as well")))


def _run_facts(nuts: NUTS, d: Diagnostics, steps: float) -> dict:
    return {"parametrization": nuts.parametrization, "chart_rank": nuts.chart_rank,
            "target_accept": nuts.target_accept, "tune": nuts.tune, "draws": nuts.draws,
            "divergences": d.divergences, "max_rhat": d.max_rhat, "min_ess_bulk": d.min_ess_bulk,
            "min_ess_tail": d.min_ess_tail, "seconds": d.seconds, "leapfrog_steps": steps}


def _coordinates(nuts: NUTS, with_target: bool = False, with_length: bool = False) -> str:
    """The coordinates in words; ``with_target``, ``with_length``: and the target and length they ran at."""
    name = "factored model" if nuts.chart_rank is None else f"chart (r₁ = {nuts.chart_rank})"
    if with_target:
        name += f" at target_accept {nuts.target_accept:g}"
    if with_length:
        name += f" ({nuts.tune} tuning steps + {nuts.draws} draws)"
    return name


def _told(d: Diagnostics) -> str:
    if d.status is FitStatus.STOPPED:
        return (f"was stopped at its first divergence after the warm-up ({d.divergences} divergent "
                f"draw{'s' * (d.divergences != 1)} by {d.seconds:.0f} s)")
    return (f"gave {d.divergences} divergence{'s' * (d.divergences != 1)}, R-hat {d.max_rhat:.3f}, ESS "
            f"{d.min_ess_bulk:.0f} in {d.seconds:.0f} s")


def geometry_record(geometry, ran: NUTS, runs: list[tuple[NUTS, Diagnostics, float]],
                    start_note: str) -> dict:
    """What ran and why, for ``settings["geometry"]``: the choice, its reason, and a fall-back's cause.

    ``ran``: the NUTS settings of the run kept; ``runs``: the settings, diagnostics and
    leapfrog steps of every run, in order, when a troubled automatic chart was followed by
    others (:func:`~.geometry.fallbacks`, kept by :func:`ranking`), empty when
    the first run was kept alone. The record's ``first`` holds the first run's facts and
    ``fallbacks`` those of the runs after it.
    """
    record = {"parametrization": ran.parametrization, "chart_rank": ran.chart_rank,
              "reason": geometry.reason,
              "fell_back": bool(runs) and _coordinates(runs[0][0]) != _coordinates(ran)}
    if runs:
        record["first"] = _run_facts(*runs[0])
        record["fallbacks"] = [_run_facts(*run) for run in runs[1:]]
        # A retry differs from the run before it only in target_accept or length, so all say it then.
        shown = (len({nuts.target_accept for nuts, _, _ in runs}) > 1,
                 len({(nuts.tune, nuts.draws) for nuts, _, _ in runs}) > 1)
        told = [f"the {_coordinates(nuts, *shown)} {_told(d)}" for nuts, d, _ in runs]
        record["reason"] += ("; " + ", so ".join(told) + f": the run of the {_coordinates(ran, *shown)} was "
                             f"kept, as the best of the {len(runs)}")
    if start_note:
        record["start"] = start_note
    return record


def geometry_notes(settings: dict) -> list[str]:
    """Where the chains started and which coordinates NUTS moved in, and why, from a fit's ``settings``."""
    record = settings.get("geometry", {})
    notes = []
    if record:
        rank = record["chart_rank"]
        ran = record["parametrization"] + (f" (r₁ = {rank})" if rank else "")
        notes.append(f"NUTS moved in the {ran} coordinates: {record['reason']}.")
    start = record.get("start") or settings.get("start")
    if start:
        notes.append(f"The start: {start}.")
    return notes


def troubled(d: Diagnostics, rhat_max: float) -> bool:
    """Whether a NUTS fit diverged or its chains disagree (R-hat above ``rhat_max``).

    A short ESS alone is no sign of a bad geometry (too few draws give it too), so it
    does not make the default run the factored model as well.
    """
    return bool(d.divergences or not d.max_rhat <= rhat_max)


def ranking(d: Diagnostics, rhat_max: float, leapfrog_steps: float, ess_min: float = 0.0) -> tuple:
    """Sort key of two NUTS fits of one posterior (larger is better).

    No divergence first, then R-hat within ``rhat_max``, then the smallest ESS reaching
    ``ess_min`` (a run lengthened for its ESS has about the short run's ESS per step), then
    the larger smallest ESS per leapfrog step (``leapfrog_steps``, all chains' gradient
    evaluations after tuning). Per step, not per second: the same seed then keeps the same
    fit on a loaded machine as on an idle one (on a 2-core machine with other work, the
    seconds of one run varied 2×).
    """
    rhat = d.max_rhat if np.isfinite(d.max_rhat) else np.inf
    ess = smallest_ess(d)
    rate = ess / leapfrog_steps if np.isfinite(ess) and leapfrog_steps > 0 else 0.0
    return (not d.divergences, rhat <= rhat_max, bool(ess >= ess_min), rate)


def short_of_ess(d: Diagnostics, nuts: NUTS) -> bool:
    """Whether a run's one shortfall is its ESS (no divergence, R-hat within ``nuts.rhat_max``, the smallest
    ESS below ``nuts.ess_min``), and twice its draws would reach it (the advice of its warning)."""
    return (not d.divergences and d.max_rhat <= nuts.rhat_max and smallest_ess(d) < nuts.ess_min
            and twice_reaches(d, nuts))


def smallest_ess(d: Diagnostics) -> float:
    """The smaller of a run's smallest bulk and tail ESS."""
    return min(d.min_ess_bulk, d.min_ess_tail)


def twice_reaches(d: Diagnostics, nuts: NUTS) -> bool:
    """Whether twice the run's smallest ESS reaches ``nuts.ess_min``: what a lengthened run (twice the draws;
    ESS grows about linearly with them) may reach, so that a run the user kept short stays so."""
    return 2 * smallest_ess(d) >= nuts.ess_min
