"""Where NUTS starts and which coordinates it moves in: the default's choice, and its fall-back.

A default that always ran the partial chart of :mod:`.chart` was fragile where the
data are few: on ``paper_problem(d_x=8, d_a=6, d_s=5, rank=2, imbalance=3, seed=11)``
at N = 1,000 it diverged 11–23 times while the factored model had no divergence and
five times the ESS. Two things decide it, and both are measurable before sampling:

**The ridge is short when the data are few.** The factored posterior's rotation and
scale ridge is about as long, in units of its width, as the leading component's
signal-to-noise ratio σ̂₁/sd(σ̂₁) (:attr:`~.chart.ChartFrame.leading_snr`, which grows
like √N), and NUTS's leapfrog steps per draw grow with it; the chart's do not. Below
:data:`SNR_CHART` the ridge is short, the factored model needs few steps, and the chart
only adds risk: its coordinates B = Θ₂₁A⁻¹ are ratios whose denominator (A, the leading
block) is within a few standard deviations of singular, which is where NUTS diverged.
So ``"auto"`` charts only where ``leading_snr ≥ SNR_CHART`` or N ≥ :data:`N_CHART`
(at q = 10 the weak components' ridges are long too; not by N alone where the rank fills the
contexts' span and the chart would be partial), and then only the components the
data determine (``chartable_rank``: a column space fixed to within ``ANGLE_MAX`` radians, and a
singular value ``SNR_CHARTED_MIN`` standard deviations or more from 0), as a block whose own
signal-to-noise ratio (:func:`block_snr`) reaches :data:`SNR_BLOCK_MIN` (:data:`SNR_BLOCK_FEW` below
:data:`N_BLOCK`, where the factored model's ridge is short), else none. At rank 1
the ratio alone is not enough: the factored model has no rotation ridge (only the scale's,
14–19 leapfrog steps per draw at ratios 16–38 against the chart's 7–9), and below
:data:`N_CHART` the chart's longer compilation cost more than its shorter trajectories saved.

**A separated start is no start.** With imbalanced data a rarely compared action can be
separable and the unpenalised MLE runs off (singular values of 10⁴ were seen at
q = 3, N = 1,000); chains started there, and a chart preconditioned there, spend the
warm-up coming back. The posterior itself is proper (the prior bounds it), so the
default start is then the ridge fit with λ = 1/s² (:data:`START_RIDGE` over the prior's
scale squared), the penalty a N(0, s²) prior on the entries of Θ would give.

A partial chart from N = :data:`N_PARTIAL_RETRY` on starts at ``target_accept``
:data:`RETRY_TARGET_ACCEPT`: 11 of 13 seen there diverged at 0.9. Below it, it draws
:data:`PARTIAL_DRAWS` times ``nuts.draws``: its weak block mixes slowly.

**Fall-back.** A chart chosen by ``"auto"`` that still shows trouble after sampling
(a divergence, or R-hat above ``nuts.rhat_max``) is followed by :func:`fallbacks` on the
same data and settings, each run only while the last one is troubled: where it diverged,
the same chart at ``target_accept`` :data:`RETRY_TARGET_ACCEPT` (the robustness grids'
three charts that diverged at 0.9 had no divergence at 0.95), and, where its charted
components stand :data:`SNR_STEADY` standard deviations or more from 0, at
:data:`STEADY_TARGET_ACCEPT` after that (:attr:`~.chart.ChartFrame.snr`); a chart of fewer
components where more were charted, the largest r' whose boundary sits at a gap of the
start's singular values (σ̂_r' ≥ :data:`GAP_MIN` σ̂_(r'+1); an unseen problem, §5.1 at q = 1,
N = 10,000, r = 3, charted r₁ = 2 with the second component's angle 0.42: 5 divergences in
101 s, r' = 1 across a gap of 9.9 none, where the factored model took 775 s), at the target
the larger chart's retries reached (in five of five such fall-backs the smaller chart diverged
again at 0.9), then the factored model. A factored model that "auto" chose at rank r ≥ 2 because
its ridge looked short is watched while it tunes (nutpie's; :class:`~.watch.DeepWarmup`): where
its warm-up's trees run :data:`DEEP_TREE` deep on average, or :data:`LONG_RUN_DEPTH` deep where the rest
of the run is projected to take :data:`LONG_RUN_SECONDS` or more, it is stopped there and the chart "auto"
runs where the ridge is long takes its place (:func:`ridge_chart`; on dense features the leading SNR
does not measure the ridge: an unseen N = 4,000 problem took 1,023 leapfrog steps per draw), or, where
"auto" would chart nothing there and no component is noise, the full chart, which has no weak block. One
that diverged on deep trees after tuning is followed by that chart first. A factored model that
"auto" chose, or fell back to, follows its own advice once per cause: where it diverged, it runs again at
:data:`RETRY_TARGET_ACCEPT`, and where that diverged too at :data:`STEADY_TARGET_ACCEPT`; where its
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

from ..data import PreferenceData
from ..exceptions import ConvergenceWarning, SeparationWarning
from ..frequentist.fgd import LowRankResult, fit_low_rank
from ..model import margins
from ..results import Diagnostics
from .chart import ANGLE_MAX, SNR_CHARTED_MIN, ChartFrame, chart_frame, partial_frame
from .diagnostics import twice_reaches
from .settings import AUTO, CHART, FACTORED, NUTS
from .watch import Watch

# Charted by "auto" only from this leading signal-to-noise ratio on. Below it the factored model took
# 23-35 leapfrog steps per draw (the chart 15, at a higher cost per step and 20-30 s more compilation):
# §5.1 at N = 1,000 (ratio 12) gave the factored model 2x the chart's ESS per second, at N = 3,000
# (ratio 23) the chart 1.3x the factored model's (docs/results/posterior.md).
SNR_CHART = 20.0
# ... or from this many comparisons on, whatever the ratio: at q = 10 the weak components' ridges are
# long too (§5.1, q = 10, N = 10,000: ratio 12.6, the factored model 211 steps per draw, the partial
# chart 124). Not for a partial chart where the rank fills the contexts' span (d_x' ≤ r, so its weak
# block W Zᵀ has a square W): on four such q = 10 problems (d_x 2-4, N 6,000-10,000, ratios 10-15) the
# partial chart drew 0.22-0.6x the factored model's ESS per second (ESS 460-874 against 2,200-3,250).
N_CHART = 5000
# A start whose largest margin |η_t| exceeds this predicts some label with probability 1 − 1e-21 or more:
# separated in effect, flagged or not (§5.1 at N = 600 gave |η| ~ 1e6; the paper's cells stay below 20).
MARGIN_MAX = 50.0
START_RIDGE = 1.0  # λ of the default start's ridge times 1/s²: (λ/2)‖Θ‖²_F is a N(0, s²/λ) prior's
# A divergent automatic chart is first re-run at this target_accept (where the user's is lower): the
# robustness grids' three divergent charts had no divergence at 0.95 and were kept, in 122-265 s where the
# fall-backs had taken 281-1,115 s (docs/results/posterior.md). So is a divergent automatic
# factored model: an unseen q = 30 problem diverged once at 0.9 and not at 0.95.
RETRY_TARGET_ACCEPT = 0.95
# A chart whose charted components all stand SNR_STEADY standard deviations or more from 0 and that still
# diverged at RETRY_TARGET_ACCEPT is run once more at STEADY_TARGET_ACCEPT: its ratio coordinates are then
# far from singular, and the divergences came from the factored weak block near a noise component, which
# smaller steps follow. Two unseen N = 15,000-20,000 problems (charted SNR 44 and 46) diverged 4 and 17
# times at 0.9 and not at 0.99, in 80-86 s where the factored model took 253-267 s. Below, smaller steps
# did not help (charted SNR 5.6-8.1: 30 divergences at 0.9, 61 at 0.95), or the run at 0.99 drew 0.2-0.6x
# the factored model's ESS per second (charted SNR 5.8-7.4; 12.5 at q = 30; 15.2 twice at N = 10,000, one
# of them paper grid 2091 #15). A divergent automatic factored model runs at STEADY_TARGET_ACCEPT too: an
# unseen N = 1,500 problem diverged at 0.9 and 0.95, and not at 0.99.
SNR_STEADY = 25.0
STEADY_TARGET_ACCEPT = 0.99
# A partial chart (r₁ < r) from this N on starts at RETRY_TARGET_ACCEPT: there its factored weak block sits
# about components a few standard deviations from 0, and 11 of 13 such charts seen diverged at 0.9 and
# ran again (unseen problems at N = 15,000-30,000, 1-114 divergences; §5.1 at q = 10, N = 100,000, 1 and 3
# on two GPUs). On seven of them (N = 15,000-30,000) the default drew 1.16-4.9x its former ESS per second
# where the chart had diverged at 0.9, and 0.60x and 0.70x on the two whose chart had not (geometric mean
# 1.36x; docs/results/posterior.md). At N = 10,000 the grids' partial charts diverged
# at 0.9 too, but §5.1's q = 10 chart did not, and at 0.95 drew an ESS of 284-408 (three seeds; ess_min 400).
N_PARTIAL_RETRY = 15000
# A partial chart below N_PARTIAL_RETRY draws this many times nuts.draws (the tuning as set): its weak block's
# entries mix slowly (ESS 530-590 of 4,000 draws on §5.1 at q = 10, N = 10,000), so at 1,000 draws a chain
# their R-hat sits at the edge of 1.01 (sampler seed 2 missed at 1.012 and fell back to the factored model,
# 289 s). At 1,500, four sampler seeds of four converged (R-hat 1.0036-1.0045, ESS 788-1,006, 76-79 s).
PARTIAL_DRAWS = 1.5
# A smaller chart's boundary r' must sit at a gap σ̂_r' ≥ GAP_MIN σ̂_(r'+1): across a narrower one the
# posterior swaps the components. Across 1.35 (§5.1, q = 10, N = 10,000, r₁ = 2) the chart diverged 38
# times, across 1.23 (q = 30, N = 20,000) 19 times; across 9.9 and 7.3, 0 and 1 times
# (docs/results/posterior.md).
GAP_MIN = 2.0
# "auto" charts a block of r₁ components only where its signal-to-noise ratio (Σ_(k ≤ r₁) SNR_k⁻²)^(−1/2)
# (:func:`block_snr`) stands SNR_CHARTED_MIN from 0 too, as each component must: each component's ratio
# coordinates bend by about 1/SNR_k, and the bends add over the block. Of 13 first charts of r₁ ≥ 2 with a
# block SNR of 2.9-4.8 (q 3-30, N 6,000-20,000, 11 of them unseen), 11 diverged or missed R-hat (1-45
# divergences, R-hat up to 1.0165) and one drew an ESS of 260; two of them, whose retries failed too, drew
# 0.52x and 0.80x the factored model's ESS per second. Over the three grids and 40 earlier unseen problems
# the rule changes only those two charts. Charting such a block's leading components up to a gap instead
# drew 1.14, 0.80, 1.28 and 0.39x (a chart of the leading component at SNR 5.1, with 196 divergences) the
# factored model's ESS per second on four of them (docs/results/posterior.md).
SNR_BLOCK_MIN = SNR_CHARTED_MIN
# Below N_BLOCK a block of r₁ ≥ 2 needs this SNR instead: there the factored model's ridge is short, and a
# chart of several components lost even where it converged. Ten unseen problems (q = 1, N = 3,000-4,000,
# leading SNR 22-27, the second component's 5.1-6.7, blocks 5.0-6.5): seven diverged at 0.9 and ran
# fall-backs, drawing 0.22-0.67x the factored model's ESS per second; two converged at once and drew
# 0.57-0.58x (ESS per draw about half its); one drew 1.82x (docs/results/posterior.md). The three grids
# chart no such block. A chart of one component keeps SNR_BLOCK_MIN:
# its block is the leading SNR, which SNR_CHART or N_CHART already judged (the §5.1 q = 10 chart at N =
# 5,000-6,000 has 8.3-8.4).
SNR_BLOCK_FEW = 10.0
# ... from N_CHART up to this N too: of three unseen charts of r₁ = 2 at N = 5,000 (blocks 5.0-5.7), two
# drew 0.41 and 0.62x the factored model's ESS per second and one 0.92x; at N = 6,000 four drew 0.95-1.98x
# and at 8,000 two drew 2.6-2.7x, the factored model's trajectories lengthening with N.
N_BLOCK = 6000
# N alone (leading SNR below SNR_CHART) does not chart a partial chart whose weak block holds a component
# within this many standard deviations of 0: on five unseen problems (d_x 3-6, q 10-30, N 10,000-20,000,
# leading SNR 8.6-16, weakest weak component 0.8-2.4) the chart of r₁ = 1 diverged at 0.9 and drew
# 0.33-0.60x the factored model's ESS per second after its retries; the §5.1 q = 10 problem's weak
# components stand 4.9 and 5.9 from 0, and its chart is 3x faster per ESS. The cost: one unseen chart of
# r₁ = 2 (q = 30, weakest 2.8) that had converged on its first run now runs the factored model, about 7x
# slower per ESS (docs/results/posterior.md).
SNR_WEAK_NOISE = 3.0
# An automatic factored model chosen because its ridge looked short (leading SNR < SNR_CHART, N < N_CHART)
# that diverged with trees this deep on average (2^8 = 256 leapfrog steps per draw or more) is followed by
# the chart "auto" would run on a long ridge, before its own retries: the leading SNR does not measure the
# ridge on dense features. An unseen problem (wide contexts and features, N = 4,000, r = 3, SNRs 5.2, 4.0,
# 3.9) diverged at 0.9 and took 1,023 steps per draw at 0.95, 1,326 s in all; its chart of the leading
# component converged at once in 82 s (ESS per second 13x). Factored runs at N < N_CHART on the paper's
# simulation take 23-35 steps per draw, so the grids never reach it (docs/results/posterior.md).
DEEP_TREE = 8.0
# Such a factored run is watched while it tunes and stopped for that chart where its warm-up's trees run
# DEEP_TREE deep, or LONG_RUN_DEPTH deep (2^7 = 128 steps) where the rest of its run is projected to take
# LONG_RUN_SECONDS or more. Five unseen problems read 6.96-7.50 in warm-up: four (N = 3,000-4,000,
# projected 213-234 s on the loaded 2-core machine) drew 3.7-6.1x the factored model's ESS per second
# charted; one (N = 600, projected 36 s) 0.33x, the chart's compilation outlasting the whole factored fit
# (docs/results/posterior.md).
LONG_RUN_DEPTH = 7.0
LONG_RUN_SECONDS = 100.0
WATCH = Watch(DEEP_TREE, LONG_RUN_DEPTH, LONG_RUN_SECONDS)
# ... the shallower stop only where the chart is full (r₁ = r): its four gains were full charts, and the one
# partial chart it reached (strangers 9615 #0, weak SNRs 3.9 and 3.2, depth 7.44) mixed slowly, 0.40x the
# factored model's ESS per second. A partial chart waits for DEEP_TREE (9601 #10 at depth 9.95: 13.8x).
PARTIAL_WATCH = Watch(DEEP_TREE)
# The watch's full chart where "auto" charts nothing (ridge_chart) needs a block SNR of this much: its charts
# with blocks 2.97-4.5 converged at once where the span spared them (below), and the two with blocks 1.19
# and 1.81 (SNRs 1.7-3.4) diverged 316 times (strangers 9605 #2, forced) and fell back (9615 #2, 0.78x the
# default before).
SNR_FULL_BLOCK_MIN = 2.5
# ... and a rank that leaves the differences' span this many dimensions or more: the two of its charts that
# diverged and fell back (strangers 9612 #6 and 9618 #6, 0.87x and 0.72x) had r = d_φ' − 1; the eight that
# won had 3 or more to spare (the contexts' side spared 1 on three winners, so only the differences' counts).
FULL_SPAN_SPARE = 2


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
        (a divergent run's retry, or a partial chart at N ≥ :data:`N_PARTIAL_RETRY`:
        :data:`RETRY_TARGET_ACCEPT`); None: the user's. :meth:`target` is the one that runs.
    draws_scale : float
        The run's draws over ``nuts.draws`` (:data:`PARTIAL_DRAWS` for a partial chart below
        :data:`N_PARTIAL_RETRY`; the tuning stays the user's).
    lengthened : bool
        Twice the user's tuning and draws (:func:`~.diagnostics.lengthened`: a
        factored run whose chains disagreed, run again as its advice says).
    short_ridge_frame : ChartFrame or None
        Where ``"auto"`` ran the factored model at rank r ≥ 2 because its ridge looked
        short (:func:`long_ridge`), or refused a block below :data:`SNR_BLOCK_FEW` (set where the
        ridge is short), the full chart's frame it declined: what the watch and :func:`fallbacks`
        chart if that run's trees run deep (:data:`DEEP_TREE`).
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


def largest_margin(theta: np.ndarray, data: PreferenceData) -> float:
    """max_t |η_t| of Θ on the data: above :data:`MARGIN_MAX` a start is separated in effect."""
    return float(np.abs(margins(theta, data.contexts, data.delta)).max())


def check_user_start(start: LowRankResult, data: PreferenceData, scale: float) -> None:
    """Warn (:class:`~bayes_loco.SeparationWarning`) where a start the user gave is separated in effect.

    It is kept, as a named setting is; the warning says what the default would have done.
    """
    margin = largest_margin(start.theta, data)
    if margin > MARGIN_MAX:
        lam = START_RIDGE / scale**2
        warnings.warn(f"start predicts some comparisons with certainty (max |η| = {margin:.3g} > "
                      f"{MARGIN_MAX:g}, largest singular value {np.linalg.norm(start.theta, 2):.3g}): chains "
                      "started there spend the warm-up coming back and can diverge. Pass start=None for the "
                      f"default start (the ridge fit here), or start=fit_low_rank(data, rank, ridge={lam:g})",
                      SeparationWarning, stacklevel=6)  # the user's call of fit_posterior


def default_start(data: PreferenceData, rank: int, ridge: float,
                  scale: float) -> tuple[LowRankResult, float, str]:
    """The frequentist low-rank fit NUTS starts from, its ridge, and a note when it is not ``ridge``'s.

    With ``ridge`` 0 (the default) the unpenalised fit is tried first; if its MLE
    start was separated, a margin |η_t| exceeds :data:`MARGIN_MAX`, or FGD did not
    converge, the ridge fit with λ = :data:`START_RIDGE`/s² is used instead (see the module docstring) and the
    note says so. Their warnings are not passed on then: the posterior is proper.
    """
    if ridge > 0:
        return fit_low_rank(data, rank, ridge=ridge), ridge, ""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plain = fit_low_rank(data, rank)
    margin = largest_margin(plain.theta, data)
    separated = (plain.initial is not None and plain.initial.separated) or margin > MARGIN_MAX
    if not separated and plain.diagnostics.converged:
        for w in caught:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return plain, ridge, ""
    lam = START_RIDGE / scale**2
    why = f"separated: max |η| = {margin:.3g}" if separated else "FGD did not converge"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (SeparationWarning, ConvergenceWarning))
        fit = fit_low_rank(data, rank, ridge=lam)
    return fit, lam, (f"started from the ridge fit (λ = {lam:g}): the unpenalised start was unusable ({why}, "
                 f"largest singular value {np.linalg.norm(plain.theta, 2):.3g})")


def choose_geometry(data: PreferenceData, rank: int, theta_start: np.ndarray, scale: float,
                    parametrization: str, chart_rank: int | None) -> Geometry:
    """The coordinates of ``nuts.parametrization`` (and ``nuts.chart_rank``) on these data.

    ``"factored"`` and ``"chart"`` are taken as named. ``"auto"`` charts the
    components the data determine (``ChartFrame.chartable_rank``, or
    ``chart_rank`` if given) where the leading signal-to-noise ratio reaches
    :data:`SNR_CHART` (at rank r ≥ 2) or N reaches :data:`N_CHART`, and is factored
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
    if not long_ridge(frame, data.n):
        return Geometry(None, f"the leading component's signal-to-noise ratio {frame.leading_snr:.1f} < "
                              f"{SNR_CHART:g} and N = {data.n} < {N_CHART}: the factored model's ridge is "
                              "short here", True, short_ridge_frame=frame if rank >= 2 else None)
    why = (f"signal-to-noise ratio {frame.leading_snr:.1f} >= {SNR_CHART:g}" if frame.leading_snr >= SNR_CHART
           else f"N = {data.n} >= {N_CHART}")
    return _auto_chart(frame, data, rank, scale, chart_rank, why)


def _auto_chart(frame: ChartFrame, data: PreferenceData, rank: int, scale: float, chart_rank: int | None,
                why: str, measured: bool = False) -> Geometry:
    """``"auto"``'s chart where the factored ridge is long (``why``): the determined block, or the factored
    model and the reason none is charted.

    ``measured``: the factored model's own trees showed the ridge long, so a block of several
    components below :data:`N_BLOCK` needs :data:`SNR_BLOCK_MIN`, not :data:`SNR_BLOCK_FEW` (set where
    the ridge is short).
    """
    snr = frame.leading_snr
    # At rank 1 only N decides: a problem of the unseen grid (§5.1, r = 1, N = 3,000, 20 × 10 × 20, ratio
    # 23.9) charted drew 0.58-0.74x the factored model's ESS per second, the chart's compilation being half
    # its time; at N = 100,000 (ratio ~120) the chart took 7.0 steps per draw against 36.9.
    if rank == 1 and data.n < N_CHART:
        why = (f"rank 1 and N = {data.n} < {N_CHART}: the factored model has no rotation ridge, and the "
               "chart's compilation would cost more than its shorter trajectories save")
        return Geometry(None, why, True)
    r1 = frame.chartable_rank if chart_rank is None else chart_rank
    weak = chart_rank is None and snr < SNR_CHART and 0 < r1 < rank
    if weak and (trouble := _weak_block_trouble(frame, r1)):
        return Geometry(None, f"{why} but the leading signal-to-noise ratio {snr:.1f} < {SNR_CHART:g}, and "
                              f"{trouble}", True)
    # One component's block is its SNR, judged by SNR_CHART or N_CHART.
    few = r1 >= 2 and data.n < N_BLOCK and not measured
    floor, why_few = (SNR_BLOCK_FEW, f" (N = {data.n} < {N_BLOCK})") if few else (SNR_BLOCK_MIN, "")
    if chart_rank is None and r1 and (block := block_snr(frame, r1)) < floor:
        # Refused for SNR_BLOCK_FEW, the factored model is watched as a short-looking ridge is: strangers 9615
        # #6 (rank 4, N = 4,000, block 5.4) took 517 leapfrog steps per draw unwatched.
        return Geometry(None, f"the block of {r1} determined components has a signal-to-noise ratio "
                              f"{block:.1f} < {floor:g}{why_few}: its ratio coordinates bend together", True,
                        short_ridge_frame=frame if few else None)
    if r1 == 0:
        angles, snrs = np.array2string(frame.angles, precision=2), np.array2string(frame.snr, precision=1)
        return Geometry(None, f"no component is determined: angles {angles} rad (at most {ANGLE_MAX:g} to "
                              f"chart), signal-to-noise ratios {snrs} (at least {SNR_CHARTED_MIN:g})", True)
    why = f"{why}; {r1} of {rank} components determined"
    if r1 == rank:
        return Geometry(frame, why, True)
    frame = partial_frame(frame, data, r1, scale)
    if data.n < N_PARTIAL_RETRY:
        return Geometry(frame, f"{why}; {PARTIAL_DRAWS:g} × the draws (a partial chart's weak block mixes "
                               "slowly)", True, draws_scale=PARTIAL_DRAWS)
    return Geometry(frame, f"{why}; target_accept {RETRY_TARGET_ACCEPT:g} from the start (a partial chart "
                           f"at N >= {N_PARTIAL_RETRY})", True, RETRY_TARGET_ACCEPT)


def _partial_draws(n: int) -> float:
    """A partial chart's ``draws_scale`` at N = ``n``: :data:`PARTIAL_DRAWS` below :data:`N_PARTIAL_RETRY`."""
    return PARTIAL_DRAWS if n < N_PARTIAL_RETRY else 1.0


def _weak_block_trouble(frame: ChartFrame, r1: int) -> str:
    """Why a partial chart of ``r1`` components that N alone would choose is not run ('' where none).

    The rank fills the contexts' span (r ≥ d_x'; see :data:`N_CHART`), or the weak block holds a
    component within :data:`SNR_WEAK_NOISE` standard deviations of 0.
    """
    span, rank = frame.left.shape[1], frame.snr.size
    if rank >= span:
        return (f"the rank {rank} fills the contexts' span ({span} dimensions): a partial chart's weak block "
                "would be a square product")
    weakest = float(frame.snr[r1:].min())
    if weakest < SNR_WEAK_NOISE:
        return (f"the weak block holds a component {weakest:.1f} standard deviations from 0 (< "
                f"{SNR_WEAK_NOISE:g}): a partial chart mixes slowly about its noise")
    return ""


def block_snr(frame: ChartFrame, r1: int) -> float:
    """The signal-to-noise ratio of the block of the leading ``r1`` components, (Σ_(k ≤ r₁) SNR_k⁻²)^(−1/2).

    SNR_k is :attr:`~.chart.ChartFrame.snr` (σ̂_k over its Gauss–Newton standard deviation);
    one component's block has its own SNR, and each component added lowers it.
    """
    return float(np.sum(frame.snr[:r1] ** -2.0) ** -0.5)


def long_ridge(frame: ChartFrame, n: int) -> bool:
    """Whether the factored model's ridge is long on these data: where ``"auto"`` charts at all.

    The leading signal-to-noise ratio reaches :data:`SNR_CHART` or N reaches :data:`N_CHART`.
    There a divergent chart is worth a retry at :data:`RETRY_TARGET_ACCEPT` (what :func:`fallbacks`
    tries first, and what the advice of a chart the user named says); below, its ratio coordinates
    are near-singular and a higher target made them worse (a chart at N = 1,000: 142 divergences at 0.95).
    """
    return frame.leading_snr >= SNR_CHART or n >= N_CHART


def advised_target(geometry: Geometry, n: int) -> float | None:
    """The ``target_accept`` a divergent run in ``geometry`` is advised before the factored model, or None.

    :data:`RETRY_TARGET_ACCEPT` for a chart the user named on data where the factored
    model's ridge is long (:func:`long_ridge`); None otherwise: an automatic chart's retry at
    that target is one of its :func:`fallbacks` already, and below the long ridge the
    factored model is the advice.
    """
    if geometry.frame is None or geometry.automatic or not long_ridge(geometry.frame, n):
        return None
    return RETRY_TARGET_ACCEPT


def fallbacks(geometry: Geometry, data: PreferenceData, scale: float, nuts: NUTS,
              latest: Callable[[], Diagnostics]) -> Iterator[Geometry]:
    """The coordinates to try, in order, after ``geometry``'s run was troubled (see the module docstring).

    None for coordinates the user named. ``nuts`` holds the user's settings; ``latest``
    gives the diagnostics of the run that ran last, asked when a retry is reached. For an
    automatic chart: where it diverged, the same chart at :data:`RETRY_TARGET_ACCEPT`, and
    where that diverged too and its charted components are steady (SNR ≥ :data:`SNR_STEADY`)
    at :data:`STEADY_TARGET_ACCEPT`; where its block (:func:`block_snr`) reaches
    :data:`SNR_BLOCK_MIN` and r₁ ≥ 2, the chart of the leading
    :func:`smaller_chart_rank` ones where a gap allows (its frame built only when reached),
    at the target the larger chart's retries reached and retried the same way above it; then
    the factored model, at the user's ``target_accept``. An
    automatic factored model, chosen first or reached so, follows its own advice once per
    cause: where it diverged, the same at :data:`RETRY_TARGET_ACCEPT`, then at
    :data:`STEADY_TARGET_ACCEPT`; where its R-hat
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
        reaches_floor = block_snr(geometry.frame, geometry.frame.chart_rank) >= SNR_BLOCK_MIN
        smaller = smaller_chart_rank(geometry.frame) if reaches_floor else None
        if smaller is not None:
            # Its retries' target: in five of five fall-backs past a divergent retry, the smaller chart
            # diverged again at the user's target (docs/results/posterior.md).
            chart = Geometry(partial_frame(geometry.frame, data, smaller, scale), geometry.reason, True,
                             retried.target_accept, draws_scale=_partial_draws(data.n))
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
    an automatic chart, below :data:`STEADY_TARGET_ACCEPT` for an automatic factored model, never for the
    user's."""
    return geometry.automatic and (geometry.frame is not None or geometry.target(nuts) < STEADY_TARGET_ACCEPT)


def _first_answer(first: Diagnostics, latest: Callable[[], Diagnostics]) -> Callable[[], Diagnostics]:
    """``latest`` whose next call gives ``first`` (the run before the one that ran last), and later calls
    the run that ran last."""
    pending = [first]
    return lambda: pending.pop() if pending else latest()


def _deep_tree_chart(geometry: Geometry, data: PreferenceData, scale: float,
                     d: Diagnostics) -> Geometry | None:
    """The chart that follows a factored model whose short-looking ridge diverged on deep trees, or None.

    Where that run diverged with a mean tree depth of :data:`DEEP_TREE` or more: :func:`ridge_chart`.
    """
    if not d.divergences or not (d.mean_tree_depth or 0.0) >= DEEP_TREE:
        return None
    return ridge_chart(geometry, data, scale, f"the factored model diverged {d.divergences} times on trees "
                                              f"of mean depth {d.mean_tree_depth:.1f} >= {DEEP_TREE:g}")


def ridge_chart(geometry: Geometry, data: PreferenceData, scale: float, why: str) -> Geometry | None:
    """The chart that replaces a factored model whose short-looking ridge proved long (``why``), or None.

    Only for a factored model ``"auto"`` chose on the leading SNR (``short_ridge_frame``) at the
    user's target; the chart is the one ``"auto"`` runs where the ridge is long (the same refusals,
    but a block of several components needs :data:`SNR_BLOCK_MIN` at any N: the factored model's
    trees measured the ridge), at the user's target. Where ``"auto"`` would chart nothing there, the full
    chart if every component stands :data:`SNR_WEAK_NOISE` or more standard deviations from 0 and within
    ``ANGLE_MAX`` radians of its column space (no weak block to couple with), the block's SNR reaches
    :data:`SNR_FULL_BLOCK_MIN` and the rank leaves :data:`FULL_SPAN_SPARE` dimensions of the
    differences' span, else None.
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
    if (frame.snr.min() >= SNR_WEAK_NOISE and frame.angles.max() <= ANGLE_MAX and block >= SNR_FULL_BLOCK_MIN
            and spare >= FULL_SPAN_SPARE):
        none = (f"none of them noise (each {SNR_WEAK_NOISE:g} or more standard deviations from 0, within "
                f"{ANGLE_MAX:g} rad)")
        return Geometry(frame, f"{why}; all {frame.rank} components charted, {none}: the full chart has no "
                               f"weak block, and its block's SNR is {block:.1f} >= {SNR_FULL_BLOCK_MIN:g}",
                        True)
    return None


def watch_for(chart: Geometry) -> Watch:
    """How a factored warm-up is watched for ``chart``: :data:`WATCH` for a full chart (r₁ = r), else
    :data:`PARTIAL_WATCH` (deep trees only)."""
    return WATCH if chart.chart_rank == chart.frame.rank else PARTIAL_WATCH


def _retries(geometry: Geometry, nuts: NUTS, latest: Callable[[], Diagnostics]) -> Iterator[Geometry]:
    """``geometry`` that diverged, again at :data:`RETRY_TARGET_ACCEPT`, then (the factored model, or a
    chart whose charted components all have an SNR of :data:`SNR_STEADY` or more) at
    :data:`STEADY_TARGET_ACCEPT`, each while the run before it diverged and only above the target it ran at.

    Returns the last geometry yielded (``geometry`` where none was), for what follows it.
    """
    frame = geometry.frame
    steady = frame is None or frame.snr[: frame.chart_rank].min() >= SNR_STEADY
    for target in (RETRY_TARGET_ACCEPT, STEADY_TARGET_ACCEPT) if steady else (RETRY_TARGET_ACCEPT,):
        if geometry.target(nuts) < target and latest().divergences:
            geometry = dataclasses.replace(geometry, target_accept=target)
            yield geometry
    return geometry


def smaller_chart_rank(frame: ChartFrame) -> int | None:
    """The largest r' below the frame's r₁ whose boundary sits at a gap (σ̂_r' ≥ :data:`GAP_MIN` σ̂_(r'+1)).

    None where no boundary below r₁ has one: the fall-back then goes to the factored model.
    """
    sv = frame.singular_values
    for r in range(frame.chart_rank - 1, 0, -1):
        if sv[r - 1] >= GAP_MIN * sv[r]:
            return r
    return None
