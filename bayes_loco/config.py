"""The package's switchboard: the tuning numbers that are not constants of nature, in one place.

Memory block sizes, solver tolerances and iteration limits, the sampler's thresholds, the loader's
limits and the tables' digits: each is a setting with its default and what it trades
(:data:`SETTINGS`, listed below), read where it takes effect by :func:`get_config`. Change them for
a block of code with :func:`config_context` or for the session with :func:`set_config`
(scikit-learn's pattern: a thread's settings start as the global defaults):

>>> import bayes_loco as bl
>>> bl.get_config()["newton_max"]
1000
>>> with bl.config_context(newton_max=0):   # the exact objective by first-order methods at any size
...     bl.get_config()["newton_max"]
0
>>> bl.get_config()["newton_max"]
1000

The defaults are the numbers the package's results were measured with; what each trades is said
beside it. A setting changes how a result is computed, never what it estimates, unless its text says
so (the sampler's thresholds choose a parametrisation; the loader's limits refuse files). The values
a setting accepts are its ``domain``; a value of another type, or outside it, is refused with the
setting's name, and nothing changes:

>>> bl.set_config(chunk=0)
Traceback (most recent call last):
ValueError: chunk must be > 0, got 0 (its default is 20000)
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ._domains import (
    AT_LEAST_ONE,
    BELOW_HALF,
    BELOW_ONE,
    FRACTION,
    INCREASING_COUNTS,
    INCREASING_FRACTIONS,
    NONNEGATIVE,
    POLYGON,
    POSITIVE,
    SHARE,
    ZLIB_LEVEL,
    Domain,
    check_value,
)


@dataclass(frozen=True)
class Setting:
    """One tuning number: its default, where it takes effect, the values it accepts, and what it trades."""

    default: object
    module: str
    domain: Domain
    doc: str


#: Every setting, by name: its default, the module that reads it, and what it trades.
SETTINGS: dict[str, Setting] = {
    "expansion": Setting(
        64.0, "bayes_loco._h5safety", NONNEGATIVE,
        "How many times its size in bytes a file may make the loader allocate (plus ``slack``)."),
    "slack": Setting(
        16 * 2 ** 20, "bayes_loco._h5safety", NONNEGATIVE,
        "Bytes every file may use beyond ``expansion`` times its size (dimension placeholders, small "
        "files)."),
    "max_string": Setting(
        1024, "bayes_loco._h5safety", POSITIVE,
        "The longest fixed-width string (in characters) of a dtype a file may name."),
    "max_vlen_strings": Setting(
        1000000, "bayes_loco._h5safety", NONNEGATIVE,
        "The most variable-length strings one variable may hold (each becomes a Python str)."),
    "h5_scan_block": Setting(
        64, "bayes_loco._h5safety", POSITIVE,
        "Variable-length strings read at once while their lengths are added up."),
    "compression_level": Setting(
        4, "bayes_loco._iowrite", ZLIB_LEVEL,
        "zlib level of :func:`save`: above it files shrink by under 1% more (a MAP posterior, N = 3,000), "
        "slower."),
    "compress_min_bytes": Setting(
        4096, "bayes_loco._iowrite", NONNEGATIVE,
        "Arrays smaller than this are written plain: a chunked, compressed array costs more than it saves."),
    "ellipse_points": Setting(361, "bayes_loco._projection", POLYGON, "Points on each projected ellipse."),
    "max_abs": Setting(
        1e+50, "bayes_loco._validation", POSITIVE,
        "Entries of data, populations and estimates above this magnitude are refused: the model squares "
        "products of contexts and features (Gram and Fisher matrices), which overflow to inf from about "
        "1e77 each, and a value this large is a unit or encoding mistake, not a measurement."),
    "fingerprint_bytes": Setting(
        2 ** 26, "bayes_loco._validation", POSITIVE,
        "Arrays up to this many bytes are fingerprinted whole; larger ones by an evenly spaced sample of "
        "this size and their column sums, so that a fingerprint of LLM-width features (2.5 GB) costs one "
        "pass at most."),
    "check_block": Setting(
        2 ** 22, "bayes_loco._validation", POSITIVE,
        "Arrays are checked for NaN, infinity and magnitude this many entries at a time."),
    "singular_floor": Setting(
        0.001, "bayes_loco.bayes.chart", FRACTION,
        "Singular values of the start below this fraction of the largest are raised to it, so that T's "
        "start and the prior curvature used for preconditioning stay finite when the start has rank < r."),
    "angle_max": Setting(
        0.5, "bayes_loco.bayes.chart", POSITIVE,
        "A component is charted (nuts.parametrization=\"auto\") when its column space, and every larger "
        "component's, is fixed by the data to within this many radians at the start (ChartFrame.angles). "
        "On the paper simulation with the diagonal Θ*, at an angle of 0.45 (N = 3000) the chart drew 1.6x "
        "the factored model's ESS per gradient; at 0.75 (N = 1000) its ratio coordinates had heavy tails "
        "and it drew 10x fewer ESS per second."),
    "snr_charted_min": Setting(
        5.0, "bayes_loco.bayes.chart", NONNEGATIVE,
        "... and when its singular value stands this many standard deviations from 0 (ChartFrame.snr): "
        "nearer, A's diagonal entry is within a few of them of 0 and the ratio coordinates B = Θ₂₁A⁻¹ "
        "blow up. On synthetic Arena battles (d_x = 6: a noise component's column space looks determined, "
        "angle 0.40) rank 3 fitted to a rank-2 Θ* charted a component of SNR 4.0: 359 divergences, R-hat "
        "1.15; the robustness grids' charted components all stand 5.5 or more from 0."),
    "snr_block_min": Setting(
        5.0, "bayes_loco.bayes.geometry", NONNEGATIVE,
        "\"auto\" charts a block of r₁ components only where its signal-to-noise ratio (Σ_(k ≤ r₁) "
        "SNR_k⁻²)^(−1/2) stands this far from 0 too, as each component must (``snr_charted_min``): each "
        "component's ratio coordinates bend by about 1/SNR_k, and the bends add over the block. Of 13 first "
        "charts of r₁ ≥ 2 with a block SNR of 2.9-4.8, 11 diverged or missed R-hat. Lower: more charts, "
        "more divergent first runs; higher: more factored runs (docs/design.md)."),
    "c_star_max_bytes": Setting(
        2 ** 28, "bayes_loco.experiments.methods", POSITIVE,
        "A study's C* (an ellipsoid's ‖m(π*)‖_{W⁻¹}) is computed where its candidate features take at "
        "most this many bytes; above it (2.6 GB at LLM width, beside the set's factor) C* is left NaN. "
        "Larger: C* at larger widths, more memory."),
    "family_block_bytes": Setting(
        2 ** 27, "bayes_loco.sets.family", POSITIVE,
        "A value family's candidate features are made this many bytes of rows at a time (2.6 GB whole at "
        "LLM width). Larger: fewer, larger products and more memory."),
    "certify_dimension_ratio": Setting(
        0.05, "bayes_loco.certify", POSITIVE,
        "A certificate whose fit has more coordinates per comparison (k / N₂) warns: the MLE's values are "
        "inflated there (k / N₂ = 0.33 at d_φ = 4,096: 2.5-3.1x, every bound failed: results/width.md). "
        "Above it (k / N) calibrated_policy certifies in a row space instead of the exact Wald policy."),
    "mc_confidence": Setting(
        0.95, "bayes_loco.sets.family", FRACTION,
        "The confidence of the Monte Carlo interval of a simulated critical value (``critical_low`` .. "
        "``critical_high``, distribution-free, from binomial order statistics). Higher: wider intervals "
        "around the same critical value; it changes what is reported, not the set."),
    "target_accept_steps": Setting(
        (0.95, 0.99), "bayes_loco.bayes.diagnostics", INCREASING_FRACTIONS,
        "The target_accept values a divergent factored fit is advised to re-run with, in turn."),
    "snr_chart": Setting(
        20.0, "bayes_loco.bayes.geometry", NONNEGATIVE,
        "Charted by \"auto\" only from this leading signal-to-noise ratio on. Below it the factored model "
        "took 23-35 leapfrog steps per draw (the chart 15, at a higher cost per step and 20-30 s more "
        "compilation): §5.1 at N = 1,000 (ratio 12) gave the factored model 2x the chart's ESS per "
        "second, at N = 3,000 (ratio 23) the chart 1.3x the factored model's (docs/results/posterior.md)."),
    "n_chart": Setting(
        5000, "bayes_loco.bayes.geometry", NONNEGATIVE,
        "... or from this many comparisons on, whatever the ratio: at q = 10 the weak components' ridges "
        "are long too (§5.1, q = 10, N = 10,000: ratio 12.6, the factored model 211 steps per draw, the "
        "partial chart 124). Not for a partial chart where the rank fills the contexts' span (d_x' ≤ r, "
        "so its weak block W Zᵀ has a square W): on four such q = 10 problems (d_x 2-4, N 6,000-10,000, "
        "ratios 10-15) the partial chart drew 0.22-0.6x the factored model's ESS per second (ESS 460-874 "
        "against 2,200-3,250)."),
    "margin_max": Setting(
        50.0, "bayes_loco.bayes.geometry", POSITIVE,
        "A start whose largest margin |η_t| exceeds this predicts some label with probability 1 − 1e-21 "
        "or more: separated in effect, flagged or not (§5.1 at N = 600 gave |η| ~ 1e6; the paper's cells "
        "stay below 20)."),
    "start_ridge": Setting(
        1.0, "bayes_loco.bayes.geometry", NONNEGATIVE,
        "λ of the default start's ridge times 1/s²: (λ/2)‖Θ‖²_F is a N(0, s²/λ) prior's"),
    "retry_target_accept": Setting(
        0.95, "bayes_loco.bayes.geometry", FRACTION,
        "A divergent automatic chart is first re-run at this target_accept (where the user's is lower): "
        "the robustness grids' three divergent charts had no divergence at 0.95 and were kept, in 122-265 "
        "s where the fall-backs had taken 281-1,115 s (docs/results/posterior.md). So is a divergent "
        "automatic factored model: an unseen q = 30 problem diverged once at 0.9 and not at 0.95. A "
        "partial chart whose weak block is sampled as Z starts at it (six of eight diverged at 0.9)."),
    "snr_steady": Setting(
        25.0, "bayes_loco.bayes.geometry", NONNEGATIVE,
        "A chart whose charted components all stand ``snr_steady`` standard deviations or more from 0 and "
        "that still diverged at ``retry_target_accept`` is run once more at ``steady_target_accept``: its "
        "ratio coordinates are then far from singular, and the divergences came from the factored weak "
        "block near a noise component, which smaller steps follow. Two unseen N = 15,000-20,000 problems "
        "(charted SNR 44 and 46) diverged 4 and 17 times at 0.9 and not at 0.99, in 80-86 s where the "
        "factored model took 253-267 s. Below, smaller steps did not help (charted SNR 5.6-8.1: 30 "
        "divergences at 0.9, 61 at 0.95), or the run at 0.99 drew 0.2-0.6x the factored model's ESS per "
        "second (charted SNR 5.8-7.4; 12.5 at q = 30; 15.2 twice at N = 10,000, one of them paper grid "
        "2091 #15). A divergent automatic factored model runs at ``steady_target_accept`` too: an unseen "
        "N = 1,500 problem diverged at 0.9 and 0.95, and not at 0.99."),
    "steady_target_accept": Setting(
        0.99, "bayes_loco.bayes.geometry", FRACTION,
        "The target_accept of the last retry of a divergent run whose charted components all stand "
        "``snr_steady`` standard deviations from 0 (and of the factored model's): the ratio coordinates "
        "are then far from singular. Higher: smaller steps, more leapfrog steps per draw."),
    "partial_draws": Setting(
        1.5, "bayes_loco.bayes.geometry", POSITIVE,
        "A partial chart draws this many times nuts.draws (the tuning as set): its weak block's entries "
        "mix slowly (ESS 530-590 of 4,000 draws on §5.1 at q = 10, N = 10,000), so at 1,000 draws a chain "
        "their R-hat sits at the edge of 1.01 (sampler seed 2 missed at 1.012 and fell back to the "
        "factored model, 289 s). At 1,500, four sampler seeds of four converged (R-hat 1.0036-1.0045, "
        "ESS 788-1,006, 76-79 s)."),
    "gap_min": Setting(
        2.0, "bayes_loco.bayes.geometry", AT_LEAST_ONE,
        "A smaller chart's boundary r' must sit at a gap σ̂_r' ≥ ``gap_min`` σ̂_(r'+1): across a narrower "
        "one the posterior swaps the components. Across 1.35 (§5.1, q = 10, N = 10,000, r₁ = 2) the chart "
        "diverged 38 times, across 1.23 (q = 30, N = 20,000) 19 times; across 9.9 and 7.3, 0 and 1 times "
        "(docs/results/posterior.md)."),
    "snr_block_few": Setting(
        10.0, "bayes_loco.bayes.geometry", NONNEGATIVE,
        "Below ``n_block`` a block of r₁ ≥ 2 needs this SNR instead: there the factored model's ridge is "
        "short, and a chart of several components lost even where it converged. Ten unseen problems (q = "
        "1, N = 3,000-4,000, leading SNR 22-27, the second component's 5.1-6.7, blocks 5.0-6.5): seven "
        "diverged at 0.9 and ran fall-backs, drawing 0.22-0.67x the factored model's ESS per second; two "
        "converged at once and drew 0.57-0.58x (ESS per draw about half its); one drew 1.82x "
        "(docs/results/posterior.md). The three grids chart no such block. A chart of one component keeps "
        "``snr_block_min``: its block is the leading SNR, which ``snr_chart`` or ``n_chart`` already judged "
        "(the §5.1 q = 10 chart at N = 5,000-6,000 has 8.3-8.4)."),
    "n_block": Setting(
        6000, "bayes_loco.bayes.geometry", NONNEGATIVE,
        "... from ``n_chart`` up to this N too: of three unseen charts of r₁ = 2 at N = 5,000 (blocks "
        "5.0-5.7), two drew 0.41 and 0.62x the factored model's ESS per second and one 0.92x; at N = "
        "6,000 four drew 0.95-1.98x and at 8,000 two drew 2.6-2.7x, the factored model's trajectories "
        "lengthening with N."),
    "snr_weak_noise": Setting(
        3.0, "bayes_loco.bayes.geometry", NONNEGATIVE,
        "N alone (leading SNR below ``snr_chart``) does not chart a partial chart whose weak block holds "
        "a component within this many standard deviations of 0: on five unseen problems (d_x 3-6, q "
        "10-30, N 10,000-20,000, leading SNR 8.6-16, weakest weak component 0.8-2.4) the chart of r₁ = 1 "
        "diverged at 0.9 and drew 0.33-0.60x the factored model's ESS per second after its retries; the "
        "§5.1 q = 10 problem's weak components stand 4.9 and 5.9 from 0, and its chart is 3x faster per "
        "ESS. The cost: one unseen chart of r₁ = 2 (q = 30, weakest 2.8) that had converged on its first "
        "run now runs the factored model, about 7x slower per ESS (docs/results/posterior.md)."),
    "snr_transpose": Setting(
        6.0, "bayes_loco.bayes.chart", NONNEGATIVE,
        "A partial chart with a larger contexts' span is Θᵀ's (W in the differences' span) where its 2+ weak "
        "components each stand this many sd from 0: §5.1 at q = 10, N = 100,000 (6.7-8.7) drew 2.1-4.8x "
        "the ESS per gradient; paper-grid charts at N = 10,000 (3.0-4.4) diverged at 0.9 (docs/design.md)."),
    "deep_tree": Setting(
        8.0, "bayes_loco.bayes.geometry", POSITIVE,
        "An automatic factored model chosen because its ridge looked short (leading SNR < ``snr_chart``, "
        "N < ``n_chart``) that diverged with trees this deep on average (2^8 = 256 leapfrog steps per "
        "draw or more) is followed by the chart \"auto\" would run on a long ridge, before its own retries: "
        "the leading SNR does not measure the ridge on dense features. An unseen problem (wide contexts "
        "and features, N = 4,000, r = 3, SNRs 5.2, 4.0, 3.9) diverged at 0.9 and took 1,023 steps per "
        "draw at 0.95, 1,326 s in all; its chart of the leading component converged at once in 82 s (ESS "
        "per second 13x). Factored runs at N < ``n_chart`` on the paper's simulation take 23-35 steps per "
        "draw, so the grids never reach it (docs/results/posterior.md)."),
    "long_run_depth": Setting(
        7.0, "bayes_loco.bayes.geometry", POSITIVE,
        "Such a factored run is watched while it tunes and stopped for that chart where its warm-up's "
        "trees run ``deep_tree`` deep, or ``long_run_depth`` deep (2^7 = 128 steps) where the rest of its "
        "run is projected to take ``long_run_seconds`` or more. Five unseen problems read 6.96-7.50 in "
        "warm-up: four (N = 3,000-4,000, projected 213-234 s on the loaded 2-core machine) drew 3.7-6.1x "
        "the factored model's ESS per second charted; one (N = 600, projected 36 s) 0.33x, the chart's "
        "compilation outlasting the whole factored fit (docs/results/posterior.md)."),
    "long_run_seconds": Setting(
        100.0, "bayes_loco.bayes.geometry", NONNEGATIVE,
        "The projected seconds left in a factored run above which a warm-up of mean depth "
        "``long_run_depth`` stops it for the chart. Lower: more runs stopped early (and charted); higher: "
        "more long factored runs finish."),
    "snr_full_block_min": Setting(
        2.5, "bayes_loco.bayes.geometry", NONNEGATIVE,
        "The watch's full chart where \"auto\" charts nothing (ridge_chart) needs a block SNR of this much: "
        "its charts with blocks 2.97-4.5 converged at once where the span spared them (below), and the "
        "two with blocks 1.19 and 1.81 (SNRs 1.7-3.4) diverged 316 times (strangers 9605 #2, forced) and "
        "fell back (9615 #2, 0.78x the default before)."),
    "full_span_spare": Setting(
        2, "bayes_loco.bayes.geometry", NONNEGATIVE,
        "... and a rank that leaves the differences' span this many dimensions or more: the two of its "
        "charts that diverged and fell back (strangers 9612 #6 and 9618 #6, 0.87x and 0.72x) had r = d_φ' "
        "− 1; the eight that won had 3 or more to spare (the contexts' side spared 1 on three winners, so "
        "only the differences' counts)."),
    "laplace_rtol": Setting(
        1e-10, "bayes_loco.bayes.laplace", BELOW_ONE,
        "Eigenvalues of the MAP's negative Hessian at or below this fraction of the largest are its null "
        "space (the rotations U R, V R): the Laplace approximation puts no mass along them."),
    "max_predictive_values": Setting(
        4000000, "bayes_loco.bayes.layout", POSITIVE,
        "The largest number of entries (N × draws) of a predictive group."),
    "block_values": Setting(
        2 ** 22, "bayes_loco.bayes.loocv", POSITIVE,
        "Margins η are formed for blocks of draws of about this many numbers (draws × N × d_φ)."),
    "group_gain": Setting(
        2.0, "bayes_loco.bayes.margins", AT_LEAST_ONE,
        "Rows are grouped only where that cuts the margins' multiply-adds by at least this factor: the "
        "gathers and the scatter of their gradient cost more per multiply-add than the dense products."),
    "cache_size": Setting(
        8, "bayes_loco.bayes.samplers", NONNEGATIVE,
        "Compiled models kept per process (a chart model at the paper's sizes holds a few MB)."),
    "jax_comparisons_per_core": Setting(
        5000, "bayes_loco.bayes.samplers", NONNEGATIVE,
        "nutpie over JAX on a GPU evaluates one gradient at a time for all chains (0.55 ms each at N = "
        "10,000 on an H200), where numba evaluates one per chain and core, in time linear in N (1.2 ms at "
        "N = 10,000): below about this many comparisons per core used, numba is the faster."),
    "nu_scale": Setting(
        1.0, "bayes_loco.bayes.ties", POSITIVE,
        "σ_ν of Davidson's prior log ν ~ N(0, σ_ν²) when ``prior.nu_scale`` is not given."),
    "watch_draws": Setting(
        (50, 150), "bayes_loco.bayes.watch", INCREASING_COUNTS,
        "The warm-up draws (first, last) whose mean tree depth a watched run is judged by (a run tuning "
        "fewer than the last is not watched for depth). Earlier: a deep warm-up noticed sooner, judged "
        "on draws still finding their step size."),
    "watch_poll": Setting(
        (0.25, 4.0), "bayes_loco.bayes.watch", POSITIVE,
        "The seconds between two reads of a watched run's trace: the first wait, then 1.5 times longer "
        "each time up to the last. A read converts the trace so far (75-350 ms on two cores), so shorter "
        "waits cost the chains time, longer ones notice a deep warm-up later."),
    "chunk": Setting(
        20000, "bayes_loco.bayes.whitening", POSITIVE,
        "Rows of the N × k_c chart Jacobian formed at once for the preconditioner (bounds its memory)."),
    "shown_warnings": Setting(
        5, "bayes_loco.cli", NONNEGATIVE,
        "Distinct warnings said on stderr after a run; the rest are counted (each row keeps its own)."),
    "level_atol": Setting(
        1e-12, "bayes_loco.decisions", NONNEGATIVE,
        "A given level equal to the set's own within this (it was stored as a float) is the set's."),
    "design_block_bytes": Setting(
        256 * 1024 ** 2, "bayes_loco.design", POSITIVE,
        "Designs are formed at most this many bytes at a time: Gram and information matrices are summed "
        "block by block, and above it PRS's reduced MLE runs on the implicit design (design_operator), "
        "never N × k."),
    "mirror_panel": Setting(
        512, "bayes_loco.design", POSITIVE,
        "Rows a symmetric matrix is completed from its upper triangle at a time (no k × k temporary)."),
    "gram_panel": Setting(
        2048, "bayes_loco.design", POSITIVE,
        "Gram and Fisher matrices of more coordinates than this are summed by column panels of this width "
        "(information: large threaded dsyrk calls crash OpenBLAS on some machines)."),
    "indexed_vec_max": Setting(
        4096, "bayes_loco.design", NONNEGATIVE,
        "Item-indexed data with at most this many entries of Θ have their information summed in vec(Θ) by "
        "compared pair, then rotated into the coordinates (_indexed_information)."),
    "pair_panel": Setting(
        512, "bayes_loco.design", POSITIVE,
        "... except in RTV coordinates, where each of the r(r+1)/2 pairs of context directions gets its "
        "own d_φ × d_φ matrix, summed by column panels of this width (information: _rtv_gram)."),
    "reach_rtol": Setting(
        1e-20, "bayes_loco.design", BELOW_ONE,
        "Σ_t z_ti² below this fraction of the largest is round-off of a rotation (an RTV direction "
        "orthogonal to every Δφ_t comes out at 1e-17, squared 1e-34), not a comparison reaching "
        "coordinate i."),
    "eps": Setting(
        1e-15, "bayes_loco.evaluate", BELOW_HALF,
        "Probabilities are clipped to [EPS, 1 − EPS] in :func:`log_loss`, so a confident miss costs at "
        "most −log EPS ≈ 34.5 instead of infinity (scikit-learn's long-standing choice for float64)."),
    "gic_ranks": Setting(
        5, "bayes_loco.experiments.methods", POSITIVE,
        "The ranks 1 … this that the \"gic\" fitter's GIC chooses among. Higher: more PRS fits per study "
        "cell (slower), a wider choice."),
    "note_chars": Setting(
        300, "bayes_loco.experiments.runner", NONNEGATIVE,
        "A warning's first this many characters go into its task's rows (the ``warnings`` column, which "
        "`bayes-loco run` and `compare` also print): most messages end in what to do, so keep that."),
    "recession_rtol": Setting(
        0.01, "bayes_loco.frequentist._logistic", POSITIVE,
        "Separation test by recession: re-solving with a 1e4 times tighter gradient tolerance moves a "
        "finite maximiser by ~tol/curvature, but a separated fit runs on (‖θ‖ grows like log(1/tol))."),
    "recession_newton_steps": Setting(
        20, "bayes_loco.frequentist._logistic", POSITIVE,
        "Exact Newton's separation re-solve stops here: a finite maximiser takes one or two steps, a "
        "separated fit has moved far past ``recession_rtol`` (§5.1, q = 10, N = 5,000: 52 in 20 steps)."),
    "aggregate_share": Setting(
        0.5, "bayes_loco.frequentist.bt", SHARE,
        "Item-indexed data are aggregated before the fit when the distinct rows are at most this share of "
        "N."),
    "armijo": Setting(
        0.0001, "bayes_loco.frequentist.fgd", FRACTION,
        "The sufficient-decrease constant of FGD's Armijo backtracking (the alternating method's steps): "
        "a step is accepted where F falls by this fraction of the first-order prediction. Higher: "
        "shorter, safer steps; lower: longer steps that may need more backtracking."),
    "mle_start_max": Setting(
        20000, "bayes_loco.frequentist.fgd", NONNEGATIVE,
        "start=\"auto\" fits the paper's MLE start up to this many entries of Θ (d_x·d_φ) and takes the "
        "spectral start above. Each Newton-CG step of the MLE costs O(N d_x d_φ) per conjugate-gradient "
        "product: at d_x × d_φ = 32 × 4096 and N = 10,000 the MLE took 29 s (12 Newton steps), the "
        "spectral start one GEMM."),
    "one_thread_work": Setting(
        50000000.0, "bayes_loco.frequentist.fgd", NONNEGATIVE,
        "Below this many multiply-adds per evaluation of F (N (d_x + d_φ) r), FGD runs on one BLAS "
        "thread: L-BFGS-B's own vector work and the small GEMMs gain nothing from a second thread and pay "
        "its synchronisation (PRS at 30 × 30, N = 10,000: FGD 1.14 s with two OpenBLAS threads, 0.17 s "
        "with one)."),
    "cache_bytes": Setting(
        2 ** 25, "bayes_loco.frequentist.fgd", NONNEGATIVE,
        "A ΔΦ above the last-level cache (32 MiB here) is read in blocks of half the per-core cache (2 "
        "MiB), which leaves room for V, the block's products and their results: at N = 100,000, d_φ = "
        "4096 on an AVX-512 AMD EPYC, 0.43 s an evaluation with 1 MiB blocks, 0.49 s with 512 KiB and "
        "0.52 s with 2 MiB."),
    "fused_block_bytes": Setting(
        2 ** 20, "bayes_loco.frequentist.fgd", POSITIVE,
        "The bytes of ΔΦ read at once where ΔΦ exceeds ``cache_bytes`` (half the per-core cache here), so "
        "each block stays in cache across the fused products. Larger: fewer passes, more cache misses."),
    "information_cache_bytes": Setting(
        2 ** 28, "bayes_loco.results", NONNEGATIVE,
        "A frequentist fit keeps its k × k Wald information for later sets and intervals up to this many "
        "bytes; above it (LLM width) each call recomputes it rather than hold a second k × k matrix."),
    "max_full_w_bytes": Setting(
        2 * 1024 ** 3, "bayes_loco.frequentist.mle", NONNEGATIVE,
        "The d_x·d_φ × d_x·d_φ information matrix of the MLE baselines is refused above this."),
    "exact_newton_max": Setting(
        1500, "bayes_loco.frequentist.mle", NONNEGATIVE,
        "Fits with at most this many free entries of Θ may run Newton's method on the whole Hessian "
        "(item-indexed data always, formed differences under ``exact_newton_flops``); above it Newton-CG."),
    "exact_newton_flops": Setting(
        5 * 10 ** 10, "bayes_loco.frequentist.mle", NONNEGATIVE,
        "Formed differences take Newton's method on the whole Hessian where N·k² (its multiplications a "
        "step) is at most this, where Newton-CG's hundreds of products a step take minutes near separation."),
    "dense_laplacian_items": Setting(
        2048, "bayes_loco.indexed", NONNEGATIVE,
        "Above this many items the Laplacians are summed as sparse matrices instead of dense A × A arrays."),
    "dense_pair_keys": Setting(
        2 ** 24, "bayes_loco.indexed", NONNEGATIVE,
        "Distinct compared pairs are found by a count over all A² pair keys up to this many keys, else by "
        "sorting."),
    "range_rtol": Setting(
        1e-10, "bayes_loco.linalg", BELOW_ONE,
        "Eigenvalues of a Gram or information matrix below this fraction of the largest are treated as "
        "zero: those directions are not reached by any comparison (docs/design.md, convention 1)."),
    "identified_rtol": Setting(
        1e-06, "bayes_loco.linalg", FRACTION,
        "A feature vector with a relative component this large outside range(W) has an unbounded worst "
        "case: the set is a cylinder along the unidentified directions."),
    "cholesky_min": Setting(
        2000, "bayes_loco.linalg", NONNEGATIVE,
        "A W of at least this many coordinates is factorised by a pivoted Cholesky decomposition (about "
        "k³/3 flops; eigh costs about 9k³: 343 s at k = 16,496, PRS at LLM width) when its kept block is "
        "well conditioned: LAPACK's reciprocal condition estimate above ``cholesky_rcond``. The pivots "
        "below ``range_rtol`` of the largest are the unidentified directions, as eigenvalues below it are "
        "for eigh, so both find the same set."),
    "cholesky_rcond": Setting(
        1e-08, "bayes_loco.linalg", BELOW_ONE,
        "The reciprocal condition number below which a block's Cholesky factor is refused and the pivoted "
        "factorisation is used instead. Lower: faster unpivoted factors of worse-conditioned W, less "
        "accuracy."),
    "whiten_block_bytes": Setting(
        2 ** 27, "bayes_loco.linalg", POSITIVE,
        "Features are whitened by the pivoted Cholesky factor (and their norms taken) this many bytes at "
        "a time."),
    "margin_block_bytes": Setting(
        2 ** 27, "bayes_loco.model", POSITIVE,
        "XΘ (N × d_φ) is formed at most this many bytes at a time."),
    "simplex_atol": Setting(
        1e-06, "bayes_loco.policy_inputs", NONNEGATIVE,
        "Probabilities may miss the simplex by this much (solvers' rounding): below −tol, or rows summing "
        "to 1 ± tol, they are refused."),
    "feature_block_bytes": Setting(
        2 ** 27, "bayes_loco.policy_inputs", POSITIVE,
        "Above twice this many bytes of candidate features, the exact problem of a set that accepts "
        "FeatureBlocks (the ellipsoid, which whitens them as they come) makes them this many bytes of "
        "rows at a time: z is never whole (2.6 GB at LLM width)."),
    "significant": Setting(
        4, "bayes_loco.results", POSITIVE,
        "Significant digits of the largest value, and of the smallest standard error, a table shows."),
    "se_significant": Setting(
        2, "bayes_loco.results", POSITIVE,
        "Significant digits of the smallest standard error a summary table shows (with ``significant`` "
        "for the largest value). More: wider tables."),
    "max_decimals": Setting(
        8, "bayes_loco.results", NONNEGATIVE,
        "The most decimals a summary table prints its value columns with, whatever ``significant`` and "
        "``se_significant`` ask."),
    "ill_conditioned": Setting(
        100000000.0, "bayes_loco.results", AT_LEAST_ONE,
        "The identified part of an information matrix with a condition number above this gets a note "
        "(below 1e-10 of the largest eigenvalue a direction already counts as unidentified: "
        "``range_rtol``)."),
    "symmetry_rtol": Setting(
        1e-08, "bayes_loco.sets.description", BELOW_ONE,
        "W must equal Wᵀ to this fraction of its largest entry; it is compared this many rows at a time."),
    "symmetry_panel": Setting(
        512, "bayes_loco.sets.description", POSITIVE,
        "Rows of W compared with Wᵀ at a time in the symmetry check (``symmetry_rtol``): bounds the "
        "check's memory (no k × k temporary)."),
    "factored_min": Setting(
        8192, "bayes_loco.sets.ellipsoid", NONNEGATIVE,
        "EllipsoidSet.factored keeps only W's pivoted Cholesky factor, computed in W's memory, from this "
        "many coordinates on (W of 512 MiB): WaldFit.calibrated_set at LLM width holds one k × k matrix, "
        "not two."),
    "max_nash_cones": Setting(
        200000, "bayes_loco.sets.hull", NONNEGATIVE,
        "The Nash program over a hull of draws has J·n exponential cones; above this it is refused."),
    "zero_rtol": Setting(
        1e-12, "bayes_loco.sets.value", BELOW_ONE,
        "Directions shorter than this (relative to the longest) are the reference action's own zeros."),
    "noise_block": Setting(
        2 ** 22, "bayes_loco.simulate", POSITIVE,
        "Pure-noise features are drawn this many numbers (32 MiB) at a time."),
    "newton_max": Setting(
        1000, "bayes_loco.solvers.exact", NONNEGATIVE,
        "The exact objective is solved by Newton's method up to this many identified directions k_eff, "
        "above by an accelerated projected gradient: at k_eff = 2,080 (PRS, d_φ = 512) Newton took 163 s "
        "and 1,048 mixed units, the gradient method 6 s to the same certified value (0.197268 against "
        "0.197268). Where the first-order methods leave a gap, Newton tries last up to "
        "``newton_fallback_max`` directions."),
    "newton_fallback_max": Setting(
        4000, "bayes_loco.solvers.exact", NONNEGATIVE,
        "Up to this many identified directions, Newton's method is tried last where the first-order "
        "methods (above ``newton_max``) leave a gap. Higher: more certificates closed, at minutes per "
        "Newton system at large k_eff."),
    "first_order_max_iter": Setting(
        20000, "bayes_loco.solvers.first_order", POSITIVE,
        "The policy's ascent stops after this many iterations at most (or when the certificate closes, "
        "or stalls: ``first_order_stall``). Higher: more certificates closed, at more time."),
    "first_order_stall": Setting(
        100, "bayes_loco.solvers.first_order", POSITIVE,
        "The policy's ascent stops when the gap has not shrunk by 1 % in this many iterations (or at "
        "``first_order_max_iter``, or when the certificate closes). Lower: earlier stops, wider gaps."),
    "first_order_patience": Setting(
        200, "bayes_loco.solvers.first_order", POSITIVE,
        "The smoothed dual cuts its smoothing μ after this many iterations without progress. Lower: "
        "faster cuts, less stable iterates."),
    "contrast_bytes": Setting(64 * 2 ** 20, "bayes_loco.summary_tables", POSITIVE,
                              "Bytes of the contrasts a summary lists at most."),
}

_global = {name: setting.default for name, setting in SETTINGS.items()}
_local = threading.local()


def _settings() -> dict:
    """This thread's settings, started as a copy of the global ones."""
    if not hasattr(_local, "settings"):
        _local.settings = _global.copy()
    return _local.settings


def get_config() -> dict:
    """The current value of every setting of :data:`SETTINGS`, by name (a copy: change them with
    :func:`set_config` or :func:`config_context`).

    Returns
    -------
    dict

    Examples
    --------
    >>> bl.get_config()["feature_block_bytes"] == 2**27
    True
    """
    return _settings().copy()


def set_config(**settings) -> None:
    """Change settings of :data:`SETTINGS` for this thread until changed again.

    Parameters
    ----------
    **settings
        ``name=value`` for names of :data:`SETTINGS`: of the default's type (NumPy's scalars count;
        stored as that type) and within the setting's ``domain``.

    Raises
    ------
    TypeError
        An unknown name, or a value of another type than the default's.
    ValueError
        A value outside the setting's domain (``chunk=0``). Nothing changes where one is refused.

    Examples
    --------
    >>> bl.set_config(newton_max=500)
    >>> bl.get_config()["newton_max"]
    500
    >>> bl.set_config(newton_max=1000)  # back to its default
    """
    checked = {name: _check(name, value) for name, value in settings.items()}
    _settings().update(checked)


@contextmanager
def config_context(**settings) -> Iterator[None]:
    """Within the ``with`` block, the settings given (as :func:`set_config`); restored after it.

    Parameters
    ----------
    **settings
        As in :func:`set_config`.

    Examples
    --------
    >>> with bl.config_context(feature_block_bytes=1):
    ...     bl.get_config()["feature_block_bytes"]
    1
    """
    saved = get_config()
    set_config(**settings)
    try:
        yield
    finally:
        _settings().clear()
        _settings().update(saved)


def _check(name: str, value):
    if name not in SETTINGS:
        close = [n for n in SETTINGS if n.startswith(name[:4])]
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise TypeError(f"{name!r} is not a setting of bayes_loco.config{hint}; the settings are "
                        "bayes_loco.config.SETTINGS")
    return check_value(name, value, SETTINGS[name].default, SETTINGS[name].domain)
