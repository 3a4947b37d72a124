"""Where NUTS starts and which coordinates it moves in: the default's choice, and its fall-back.

A default that always ran the partial chart of :mod:`.chart` was fragile where the
data are few: on ``paper_problem(d_x=8, d_a=6, d_s=5, rank=2, imbalance=3, seed=11)``
at N = 1,000 it diverged 11–23 times while the factored model had no divergence and
five times the ESS. Two things decide it, and both are measurable before sampling:

**The ridge is short when the data are few.** The factored posterior's rotation and
scale ridge is about as long, in units of its width, as the leading component's
signal-to-noise ratio σ̂₁/sd(σ̂₁) (:attr:`~.chart.ChartFrame.leading_snr`, which grows
like √N), and NUTS's leapfrog steps per draw grow with it; the chart's do not. Below
``config["snr_chart"]`` the ridge is short, the factored model needs few steps, and the chart
only adds risk: its coordinates B = Θ₂₁A⁻¹ are ratios whose denominator (A, the leading
block) is within a few standard deviations of singular, which is where NUTS diverged.
So ``"auto"`` charts only where ``leading_snr ≥ config["snr_chart"]`` or N ≥ ``config["n_chart"]``
(at q = 10 the weak components' ridges are long too; not by N alone where the rank fills the
contexts' span and the chart would be partial), and then only the components the
data determine (``chartable_rank``: a column space fixed to within ``config["angle_max"]`` radians, and a
singular value ``config["snr_charted_min"]`` standard deviations or more from 0), as a block whose own
signal-to-noise ratio (:func:`block_snr`) reaches ``config["snr_block_min"]`` (``config["snr_block_few"]``
below
``config["n_block"]``, where the factored model's ridge is short), else none. At rank 1
the ratio alone is not enough: the factored model has no rotation ridge (only the scale's,
14–19 leapfrog steps per draw at ratios 16–38 against the chart's 7–9), and below
``config["n_chart"]`` the chart's longer compilation cost more than its shorter trajectories saved.

**A separated start is no start.** With imbalanced data a rarely compared action can be
separable and the unpenalised MLE runs off (singular values of 10⁴ were seen at
q = 3, N = 1,000); chains started there, and a chart preconditioned there, spend the
warm-up coming back. The posterior itself is proper (the prior bounds it), so the
default start is then the ridge fit with λ = 1/s² (``config["start_ridge"]`` over the prior's
scale squared), the penalty a N(0, s²) prior on the entries of Θ would give.

A partial chart draws ``config["partial_draws"]`` times ``nuts.draws``: its weak block mixes slowly. One
whose weak block is sampled as Z (:attr:`~.chart.ChartFrame.weak_product` False) starts at
``config["retry_target_accept"]`` where the user's target is lower: such charts diverge below it.

**Fall-back.** A chart chosen by ``"auto"`` that still shows trouble after sampling
(a divergence, or R-hat above ``nuts.rhat_max``) is followed by :func:`fallbacks` on the
same data and settings, each run only while the last one is troubled: where it diverged,
the same chart at ``target_accept`` ``config["retry_target_accept"]`` (the robustness grids'
three charts that diverged at 0.9 had no divergence at 0.95), and, where its charted
components stand ``config["snr_steady"]`` standard deviations or more from 0, at
``config["steady_target_accept"]`` after that (:attr:`~.chart.ChartFrame.snr`); a chart of fewer
components where more were charted, the largest r' whose boundary sits at a gap of the
start's singular values (σ̂_r' ≥ ``config["gap_min"]`` σ̂_(r'+1); an unseen problem, §5.1 at q = 1,
N = 10,000, r = 3, charted r₁ = 2 with the second component's angle 0.42: 5 divergences in
101 s, r' = 1 across a gap of 9.9 none, where the factored model took 775 s), at the target
the larger chart's retries reached (in five of five such fall-backs the smaller chart diverged
again at 0.9), then the factored model. A factored model that "auto" chose at rank r ≥ 2 because
its ridge looked short is watched while it tunes (nutpie's; :class:`~.watch.DeepWarmup`): where
its warm-up's trees run ``config["deep_tree"]`` deep on average, or ``config["long_run_depth"]`` deep where
the rest
of the run is projected to take ``config["long_run_seconds"]`` or more, it is stopped there and the chart
"auto"
runs where the ridge is long takes its place (:func:`ridge_chart`; on dense features the leading SNR
does not measure the ridge: an unseen N = 4,000 problem took 1,023 leapfrog steps per draw), or, where
"auto" would chart nothing there and no component is noise, the full chart, which has no weak block. One
that diverged on deep trees after tuning is followed by that chart first. A factored model that
"auto" chose, or fell back to, follows its own advice once per cause: where it diverged, it runs again at
``config["retry_target_accept"]``, and where that diverged too at ``config["steady_target_accept"]``; where
its
chains disagreed (R-hat above ``nuts.rhat_max``, no divergence), again with twice the tuning and draws,
where twice its ESS reaches ``nuts.ess_min``. A run whose divergence is followed by another
(:func:`divergence_has_fallback`) is stopped at its first divergent draw after the warm-up
(:class:`~.watch.Diverged`): its verdict is known, and the rest of it is not drawn. The fit keeps
the run :func:`~.diagnostics.ranking` prefers of those that ran to their end; the fit's
``settings["geometry"]`` and ``summary()`` say what ran, why, and what the first attempt showed. A
parametrisation the user named is never replaced; where a named chart diverged on a long ridge, its
warning advises the same retry (:func:`advised_target`) before the factored model.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from ..config import get_config
from ..data import PreferenceData
from ..exceptions import ConvergenceWarning, SeparationWarning
from ..frequentist.fgd import LowRankResult, fit_low_rank
from ..model import Ties, margins
from ..results import Diagnostics
from .chart import ChartFrame, chart_frame, partial_frame
from .diagnostics import twice_reaches
from .settings import AUTO, CHART, FACTORED, NUTS
from .watch import Watch


def full_watch() -> Watch:
    """How a factored warm-up of a full chart's problem is watched: stopped on deep trees
    (``config["deep_tree"]``), or on shallower ones (``config["long_run_depth"]``) where the rest of the run
    would take ``config["long_run_seconds"]`` or more."""
    config = get_config()
    return Watch(config["deep_tree"], config["long_run_depth"], config["long_run_seconds"])


def partial_watch() -> Watch:
    """How a factored warm-up of a partial chart's problem is watched: on deep trees only (its shallower
    stop mixed slowly where it was tried)."""
    return Watch(get_config()["deep_tree"])


@dataclass(frozen=True)
class Geometry:
    """The coordinates one NUTS run moves in.

    Attributes
    ----------
    frame : ChartFrame or None
        The chart's frame (its ``chart_rank`` r₁ components charted), or None for
        the factored model.
    reason : str
        Why, in words (recorded in the fit's settings).
    automatic : bool
        Chosen by ``"auto"``: the fit may fall back to the factored model.
    target_accept : float or None
        The step-size adaptation's target where it is above ``nuts.target_accept``
        (a divergent run's retry, or a partial chart whose weak block is sampled as Z:
        ``config["retry_target_accept"]``); None: the user's. :meth:`target`
        is the one that runs.
    draws_scale : float
        The run's draws over ``nuts.draws`` (``config["partial_draws"]`` for a partial chart; the
        tuning stays the user's).
    lengthened : bool
        Twice the user's tuning and draws (:func:`~.diagnostics.lengthened`: a
        factored run whose chains disagreed, run again as its advice says).
    short_ridge_frame : ChartFrame or None
        Where ``"auto"`` ran the factored model at rank r ≥ 2 because its ridge looked
        short (:func:`long_ridge`), or refused a block below ``config["snr_block_few"]`` (set where the
        ridge is short), the full chart's frame it declined: what the watch and :func:`fallbacks`
        chart if that run's trees run deep (``config["deep_tree"]``).
    """

    frame: ChartFrame | None
    reason: str
    automatic: bool
    target_accept: float | None = None
    lengthened: bool = False
    draws_scale: float = 1.0
    short_ridge_frame: ChartFrame | None = None

    @property
    def parametrization(self) -> str:
        return FACTORED if self.frame is None else CHART

    @property
    def chart_rank(self) -> int | None:
        return None if self.frame is None else self.frame.chart_rank

    def target(self, nuts: NUTS) -> float:
        """The ``target_accept`` this run adapts to: the geometry's, never below ``nuts.target_accept``."""
        return max(self.target_accept or 0.0, nuts.target_accept)


SEPARATED = "separated"  # the word default_start's note names a separated start by


def separated_start(note: str) -> bool:
    """Whether :func:`default_start`'s ``note`` says the unpenalised start was separated (its margins grew
    without bound), which :func:`~.diagnostics.note_separated` turns into advice."""
    return f"({SEPARATED}:" in note


def largest_margin(theta: np.ndarray, data: PreferenceData) -> float:
    """max_t |η_t| of Θ on the data: above ``config["margin_max"]`` a start is separated in effect."""
    return float(np.abs(margins(theta, data.contexts, data.delta)).max())


def check_user_start(start: LowRankResult, data: PreferenceData, scale: float) -> None:
    """Warn (:class:`~bayes_loco.SeparationWarning`) where a start the user gave is separated in effect.

    It is kept, as a named setting is; the warning says what the default would have done.
    """
    margin = largest_margin(start.theta, data)
    if margin > get_config()["margin_max"]:
        lam = get_config()["start_ridge"] / scale**2
        warnings.warn(f"start predicts some comparisons with certainty (max |η| = {margin:.3g} > "
                      f"{get_config()["margin_max"]:g}, largest singular value "
                      f"{np.linalg.norm(start.theta, 2):.3g}): chains "
                      "started there spend the warm-up coming back and can diverge. Pass start=None for the "
                      f"default start (the ridge fit here), or start=fit_low_rank(data, rank, ridge={lam:g})",
                      SeparationWarning, stacklevel=6)  # the user's call of fit_posterior


def default_start(data: PreferenceData, rank: int, ridge: float, scale: float,
                  ties: Ties = "half") -> tuple[LowRankResult, float, str]:
    """The frequentist low-rank fit NUTS starts from, its ridge, and a note when it is not ``ridge``'s.

    The fit reads ties as the posterior does (``ties``): Davidson's posterior starts from
    Davidson's rank-r fit.

    With ``ridge`` 0 (the default) the unpenalised fit is tried first; if its MLE
    start was separated, a margin |η_t| exceeds ``config["margin_max"]``, or FGD did not
    converge, the ridge fit with λ = ``config["start_ridge"]``/s² is used instead (see the module docstring)
    and the
    note says so. Their warnings are not passed on then: the posterior is proper.
    """
    if ridge > 0:
        return fit_low_rank(data, rank, ridge=ridge, ties=ties), ridge, ""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plain = fit_low_rank(data, rank, ties=ties)
    margin = largest_margin(plain.theta, data)
    separated = (plain.initial is not None and plain.initial.separated) or margin > get_config()["margin_max"]
    if not separated and plain.diagnostics.converged:
        for w in caught:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return plain, ridge, ""
    lam = get_config()["start_ridge"] / scale**2
    why = f"{SEPARATED}: max |η| = {margin:.3g}" if separated else "FGD did not converge"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (SeparationWarning, ConvergenceWarning))
        fit = fit_low_rank(data, rank, ridge=lam, ties=ties)
    return fit, lam, (f"started from the ridge fit (λ = {lam:g}): the unpenalised start was unusable ({why}, "
                 f"largest singular value {np.linalg.norm(plain.theta, 2):.3g})")


def choose_geometry(data: PreferenceData, rank: int, theta_start: np.ndarray, scale: float,
                    parametrization: str, chart_rank: int | None) -> Geometry:
    """The coordinates of ``nuts.parametrization`` (and ``nuts.chart_rank``) on these data.

    ``"factored"`` and ``"chart"`` are taken as named. ``"auto"`` charts the
    components the data determine (``ChartFrame.chartable_rank``, or
    ``chart_rank`` if given) where the leading signal-to-noise ratio reaches
    ``config["snr_chart"]`` (at rank r ≥ 2) or N reaches ``config["n_chart"]``, and is factored
    otherwise or where no chart exists (r above a span's dimension).
    """
    if chart_rank is not None and chart_rank > rank:
        raise ValueError(f"nuts.chart_rank must be at most the rank {rank}, got {chart_rank}")
    if parametrization == FACTORED:
        return Geometry(None, "nuts.parametrization='factored'", False)
    if parametrization == CHART:
        frame = chart_frame(data, theta_start, rank, scale, chart_rank)
        return Geometry(frame, "nuts.parametrization='chart'", False)
    if parametrization != AUTO:
        raise ValueError(f"unknown parametrization {parametrization!r}")
    try:
        frame = chart_frame(data, theta_start, rank, scale)
    except ValueError:
        return Geometry(None, f"no chart of rank {rank} exists: the contexts or the differences span fewer "
                              "dimensions", True)
    if not long_ridge(frame, data.n_comparisons):
        return Geometry(None, f"the leading component's signal-to-noise ratio {frame.leading_snr:.1f} < "
                              f"{get_config()["snr_chart"]:g} and N = {data.n_comparisons} < "
                              f"{get_config()["n_chart"]}: the factored model's ridge is "
                              "short here", True, short_ridge_frame=frame if rank >= 2 else None)
    why = (f"signal-to-noise ratio {frame.leading_snr:.1f} >= "
           f"{get_config()["snr_chart"]:g}" if frame.leading_snr >= get_config()["snr_chart"]
           else f"N = {data.n_comparisons} >= {get_config()["n_chart"]}")
    return _auto_chart(frame, data, rank, scale, chart_rank, why)


def _auto_chart(frame: ChartFrame, data: PreferenceData, rank: int, scale: float, chart_rank: int | None,
                why: str, measured: bool = False) -> Geometry:
    """``"auto"``'s chart where the factored ridge is long (``why``): the determined block, or the factored
    model and the reason none is charted.

    ``measured``: the factored model's own trees showed the ridge long, so a block of several
    components below ``config["n_block"]`` needs ``config["snr_block_min"]``, not
    ``config["snr_block_few"]`` (set where the ridge is short).
    """
    snr = frame.leading_snr
    # At rank 1 only N decides: a problem of the unseen grid (§5.1, r = 1, N = 3,000, 20 × 10 × 20, ratio
    # 23.9) charted drew 0.58-0.74x the factored model's ESS per second, the chart's compilation being half
    # its time; at N = 100,000 (ratio ~120) the chart took 7.0 steps per draw against 36.9.
    if rank == 1 and data.n_comparisons < get_config()["n_chart"]:
        why = (f"rank 1 and N = {data.n_comparisons} < {get_config()["n_chart"]}: the factored model has no "
               f"rotation ridge, and the "
               "chart's compilation would cost more than its shorter trajectories save")
        return Geometry(None, why, True)
    r1 = frame.chartable_rank if chart_rank is None else chart_rank
    weak = chart_rank is None and snr < get_config()["snr_chart"] and 0 < r1 < rank
    if weak and (trouble := _weak_block_trouble(frame, r1)):
        return Geometry(None, f"{why} but the leading signal-to-noise ratio {snr:.1f} < "
                              f"{get_config()["snr_chart"]:g}, and "
                              f"{trouble}", True)
    # One component's block is its SNR, judged by config["snr_chart"] or config["n_chart"].
    few = r1 >= 2 and data.n_comparisons < get_config()["n_block"] and not measured
    config = get_config()
    floor, why_few = ((config["snr_block_few"], f" (N = {data.n_comparisons} < {config['n_block']})") if few
                      else (config["snr_block_min"], ""))
    if chart_rank is None and r1 and (block := block_snr(frame, r1)) < floor:
        # Refused for config["snr_block_few"], the factored model is watched as a short-looking ridge is:
        # strangers 9615 #6 (rank 4, N = 4,000, block 5.4) took 517 leapfrog steps per draw unwatched.
        return Geometry(None, f"the block of {r1} determined components has a signal-to-noise ratio "
                              f"{block:.1f} < {floor:g}{why_few}: its ratio coordinates bend together", True,
                        short_ridge_frame=frame if few else None)
    if r1 == 0:
        angles, snrs = np.array2string(frame.angles, precision=2), np.array2string(frame.snr, precision=1)
        return Geometry(None, f"no component is determined: angles {angles} rad (at most "
                              f"{get_config()["angle_max"]:g} to "
                              f"chart), signal-to-noise ratios {snrs} (at least "
                              f"{get_config()["snr_charted_min"]:g})", True)
    why = f"{why}; {r1} of {rank} components determined"
    if r1 == rank:
        return Geometry(frame, why, True)
    frame = partial_frame(frame, data, r1, scale)
    why = f"{why}; {config['partial_draws']:g} × the draws (a partial chart's weak block mixes slowly)"
    if frame.transposed:
        why += "; Θᵀ's chart (its weak block's plane W in the differences' span, the smaller)"
    # Its weak block sampled as Z (d' < m: ChartFrame.weak_product) in the data's own orientation starts
    # at the retry's target: six of eight such charts on strangers diverged at 0.9 and were kept at 0.95
    # (docs/design.md). Θᵀ's chart runs at the user's: at 0.95 §5.1's (q = 10, N = 100,000) drew 8.1
    # effective draws per 1,000 gradients, at 0.9 12.6.
    target = None if frame.weak_product or frame.transposed else config["retry_target_accept"]
    if target is not None:
        why += (f"; at target_accept {target:g} or above (its weak block is sampled as Z, whose charts "
                "diverge at lower targets)")
    return Geometry(frame, why, True, target, draws_scale=config["partial_draws"])


def _weak_block_trouble(frame: ChartFrame, r1: int) -> str:
    """Why a partial chart of ``r1`` components that N alone would choose is not run ('' where none).

    The rank fills the contexts' span (r ≥ d_x'; see ``config["n_chart"]``), or the weak block holds a
    component within ``config["snr_weak_noise"]`` standard deviations of 0.
    """
    span, rank = frame.left.shape[1], frame.snr.size
    if rank >= span:
        return (f"the rank {rank} fills the contexts' span ({span} dimensions): a partial chart's weak block "
                "would be a square product")
    weakest = float(frame.snr[r1:].min())
    if weakest < get_config()["snr_weak_noise"]:
        return (f"the weak block holds a component {weakest:.1f} standard deviations from 0 (< "
                f"{get_config()["snr_weak_noise"]:g}): a partial chart mixes slowly about its noise")
    return ""


def block_snr(frame: ChartFrame, r1: int) -> float:
    """The signal-to-noise ratio of the block of the leading ``r1`` components, (Σ_(k ≤ r₁) SNR_k⁻²)^(−1/2).

    SNR_k is :attr:`~.chart.ChartFrame.snr` (σ̂_k over its Gauss–Newton standard deviation);
    one component's block has its own SNR, and each component added lowers it.
    """
    return float(np.sum(frame.snr[:r1] ** -2.0) ** -0.5)


def long_ridge(frame: ChartFrame, n: int) -> bool:
    """Whether the factored model's ridge is long on these data: where ``"auto"`` charts at all.

    The leading signal-to-noise ratio reaches ``config["snr_chart"]`` or N reaches ``config["n_chart"]``.
    There a divergent chart is worth a retry at ``config["retry_target_accept"]`` (what :func:`fallbacks`
    tries first, and what the advice of a chart the user named says); below, its ratio coordinates
    are near-singular and a higher target made them worse (a chart at N = 1,000: 142 divergences at 0.95).
    """
    return frame.leading_snr >= get_config()["snr_chart"] or n >= get_config()["n_chart"]


def advised_target(geometry: Geometry, n: int) -> float | None:
    """The ``target_accept`` a divergent run in ``geometry`` is advised before the factored model, or None.

    ``config["retry_target_accept"]`` for a chart the user named on data where the factored
    model's ridge is long (:func:`long_ridge`); None otherwise: an automatic chart's retry at
    that target is one of its :func:`fallbacks` already, and below the long ridge the
    factored model is the advice.
    """
    if geometry.frame is None or geometry.automatic or not long_ridge(geometry.frame, n):
        return None
    return get_config()["retry_target_accept"]


def fallbacks(geometry: Geometry, data: PreferenceData, scale: float, nuts: NUTS,
              latest: Callable[[], Diagnostics]) -> Iterator[Geometry]:
    """The coordinates to try, in order, after ``geometry``'s run was troubled (see the module docstring).

    None for coordinates the user named. ``nuts`` holds the user's settings; ``latest``
    gives the diagnostics of the run that ran last, asked when a retry is reached. For an
    automatic chart: where it diverged, the same chart at ``config["retry_target_accept"]``, and
    where that diverged too and its charted components are steady (SNR ≥ ``config["snr_steady"]``)
    at ``config["steady_target_accept"]``; where its block (:func:`block_snr`) reaches
    ``config["snr_block_min"]`` and r₁ ≥ 2, the chart of the leading
    :func:`smaller_chart_rank` ones where a gap allows (its frame built only when reached),
    at the target the larger chart's retries reached and retried the same way above it; then
    the factored model, at the user's ``target_accept``. An
    automatic factored model, chosen first or reached so, follows its own advice once per
    cause: where it diverged, the same at ``config["retry_target_accept"]``, then at
    ``config["steady_target_accept"]``; where its R-hat
    missed ``nuts.rhat_max`` without a divergence, the same run lengthened
    (:func:`~.diagnostics.lengthened`), if twice its smallest ESS reaches ``nuts.ess_min``
    (ESS grows about linearly with the draws; below that, a run the user kept short stays so), and
    that run, where it diverged, lengthened at the targets above as well.
    """
    if not geometry.automatic:
        return
    first = latest()
    if (chart := _deep_tree_chart(geometry, data, scale, first)) is not None:
        yield chart
        latest = _first_answer(first, latest)  # the factored model's retries follow its run, not the chart's
    if geometry.frame is not None:
        retried = yield from _retries(geometry, nuts, latest)
        # A block below the floor (the watch's full chart) has no smaller chart: "auto" refused its leading
        # blocks (strangers 9612 #6: the smaller chart, block 4.9, failed as well).
        reaches_floor = block_snr(geometry.frame, geometry.frame.chart_rank) >= get_config()["snr_block_min"]
        smaller = smaller_chart_rank(geometry.frame) if reaches_floor else None
        if smaller is not None:
            # Its retries' target: in five of five fall-backs past a divergent retry, the smaller chart
            # diverged again at the user's target (docs/results/posterior.md).
            chart = Geometry(partial_frame(geometry.frame, data, smaller, scale), geometry.reason, True,
                             retried.target_accept, draws_scale=get_config()["partial_draws"])
            yield chart
            yield from _retries(chart, nuts, latest)
        geometry = dataclasses.replace(geometry, frame=None, target_accept=None)
        yield geometry
    geometry = yield from _retries(geometry, nuts, latest)
    d = latest()
    if not d.divergences and not d.max_rhat <= nuts.rhat_max and twice_reaches(d, nuts):
        # A lengthened run that diverged, where the short one had not, is retried as a divergence is: an
        # unseen weak rank-1 problem (N = 4,000, SNR 3.6) missed R-hat (1.014), diverged 7 times lengthened,
        # and converged lengthened at 0.95 (R-hat 1.002, ESS 3,182).
        geometry = dataclasses.replace(geometry, lengthened=True)
        yield geometry
        yield from _retries(geometry, nuts, latest)


def divergence_has_fallback(geometry: Geometry, nuts: NUTS) -> bool:
    """Whether a divergence in ``geometry``'s run is followed by another (:func:`fallbacks`): always for
    an automatic chart, below ``config["steady_target_accept"]`` for an automatic factored model, never
    for the user's."""
    return geometry.automatic and (geometry.frame is not None
                                   or geometry.target(nuts) < get_config()["steady_target_accept"])


def _first_answer(first: Diagnostics, latest: Callable[[], Diagnostics]) -> Callable[[], Diagnostics]:
    """``latest`` whose next call gives ``first`` (the run before the one that ran last), and later calls
    the run that ran last."""
    pending = [first]
    return lambda: pending.pop() if pending else latest()


def _deep_tree_chart(geometry: Geometry, data: PreferenceData, scale: float,
                     d: Diagnostics) -> Geometry | None:
    """The chart that follows a factored model whose short-looking ridge diverged on deep trees, or None.

    Where that run diverged with a mean tree depth of ``config["deep_tree"]`` or more: :func:`ridge_chart`.
    """
    if not d.divergences or not (d.mean_tree_depth or 0.0) >= get_config()["deep_tree"]:
        return None
    return ridge_chart(geometry, data, scale, f"the factored model diverged {d.divergences} times on trees "
                                              f"of mean depth {d.mean_tree_depth:.1f} >= "
                                              f"{get_config()["deep_tree"]:g}")


def ridge_chart(geometry: Geometry, data: PreferenceData, scale: float, why: str) -> Geometry | None:
    """The chart that replaces a factored model whose short-looking ridge proved long (``why``), or None.

    Only for a factored model ``"auto"`` chose on the leading SNR (``short_ridge_frame``) at the
    user's target; the chart is the one ``"auto"`` runs where the ridge is long (the same refusals,
    but a block of several components needs ``config["snr_block_min"]`` at any N: the factored model's
    trees measured the ridge), at the user's target. Where ``"auto"`` would chart nothing there, the full
    chart if every component stands ``config["snr_weak_noise"]`` or more standard deviations from 0 and within
    ``config["angle_max"]`` radians of its column space (no weak block to couple with), the block's SNR
    reaches ``config["snr_full_block_min"]`` and the rank leaves ``config["full_span_spare"]``
    dimensions of the differences' span, else None.
    """
    frame = geometry.short_ridge_frame
    if frame is None or geometry.target_accept is not None:
        return None
    chart = _auto_chart(frame, data, frame.rank, scale, None, why, measured=True)
    if chart.frame is not None:
        return chart
    # A full chart has no weak block to couple with: nine such after deep warm-ups drew 1.15-4.7x the
    # factored model's ESS per second (docs/results/posterior.md).
    block, spare = block_snr(frame, frame.rank), frame.right.shape[1] - frame.rank
    config = get_config()
    if (frame.snr.min() >= config["snr_weak_noise"] and frame.angles.max() <= config["angle_max"]
            and block >= config["snr_full_block_min"] and spare >= config["full_span_spare"]):
        none = (f"none of them noise (each {config['snr_weak_noise']:g} or more standard deviations "
                f"from 0, within {config['angle_max']:g} rad)")
        return Geometry(frame, f"{why}; all {frame.rank} components charted, {none}: the full chart has no "
                               f"weak block, and its block's SNR is {block:.1f} >= "
                               f"{get_config()["snr_full_block_min"]:g}",
                        True)
    return None


def watch_for(chart: Geometry) -> Watch:
    """How a factored warm-up is watched for ``chart``: :func:`full_watch` for a full chart (r₁ = r), else
    :func:`partial_watch` (deep trees only)."""
    return full_watch() if chart.chart_rank == chart.frame.rank else partial_watch()


def _retries(geometry: Geometry, nuts: NUTS, latest: Callable[[], Diagnostics]) -> Iterator[Geometry]:
    """``geometry`` that diverged, again at ``config["retry_target_accept"]``, then (the factored model, or a
    chart whose charted components all have an SNR of ``config["snr_steady"]`` or more) at
    ``config["steady_target_accept"]``, each while the run before it diverged and only above the target it
    ran at.

    Returns the last geometry yielded (``geometry`` where none was), for what follows it.
    """
    frame = geometry.frame
    steady = frame is None or frame.snr[: frame.chart_rank].min() >= get_config()["snr_steady"]
    retry, steady_target = get_config()["retry_target_accept"], get_config()["steady_target_accept"]
    for target in (retry, steady_target) if steady else (retry,):
        if geometry.target(nuts) < target and latest().divergences:
            geometry = dataclasses.replace(geometry, target_accept=target)
            yield geometry
    return geometry


def smaller_chart_rank(frame: ChartFrame) -> int | None:
    """The largest r' below the frame's r₁ whose boundary sits at a gap (σ̂_r' ≥ ``config["gap_min"]``
    σ̂_(r'+1)).

    None where no boundary below r₁ has one: the fall-back then goes to the factored model.
    """
    sv = frame.singular_values
    for r in range(frame.chart_rank - 1, 0, -1):
        if sv[r - 1] >= get_config()["gap_min"] * sv[r]:
            return r
    return None
