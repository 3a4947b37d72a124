"""A watched nutpie run: stopped in its warm-up on deep trees, or at its first divergence after it.

**A watched warm-up.** Given a :class:`Watch`, :func:`~.samplers.sample_nutpie` samples in the background
and reads the trace as it grows: once a chain has drawn its warm-up draws
:data:`WATCH_DRAWS`, a mean tree depth there of the watch's ``depth`` or more, or of its
``long_depth`` where the rest of the run is projected to take ``long_seconds`` or more
(:func:`remaining_seconds`), stops the run and raises :class:`DeepWarmup`, so that the caller
can move to other coordinates having spent a tenth of the warm-up, not the whole run, on
trajectories of 2^depth leapfrog steps. nutpie's
step size has settled by then: over 54 logged problems the mean depth of those draws tracked
log₂ of the run's leapfrog steps per draw with correlation 0.98, reading 0.3-1.1 below it
(docs/results/posterior.md).

**A run stopped at its first divergence.** A watch with ``divergence`` set also follows the
chains' progress (nutpie's ``progress_callback``, which costs no read of the trace) after the
warm-up, and at the first divergent draw stops the run and raises :class:`Diverged`. The
caller sets it where a divergence decides what follows (another run), so that the rest of a
run whose fate is known is not drawn.
"""

from __future__ import annotations

import threading
import time
import warnings
from dataclasses import dataclass

import numpy as np
import nutpie
import xarray as xr

# The warm-up draws (first, last) whose mean tree depth a watched run is judged by, and the seconds
# between two reads of its trace: the first wait, then 1.5 times longer each time up to the last. A read
# converts the trace so far (75-350 ms on the 2-core machine, beside the chains), so a warm-up of deep
# trees (a minute to its draw 150) is read some twenty times, not two hundred.
WATCH_DRAWS = (50, 150)
WATCH_POLL = (0.25, 4.0)


@dataclass(frozen=True)
class Watch:
    """When a watched warm-up (:func:`~.samplers.sample_nutpie`'s ``watch``) is stopped.

    Attributes
    ----------
    depth : float
        A mean tree depth over the warm-up draws :data:`WATCH_DRAWS` (:func:`warmup_depth`)
        that stops the run.
    long_depth, long_seconds : float
        A shallower mean depth that stops it where the rest of the run is projected to
        take ``long_seconds`` or more (:func:`remaining_seconds`); infinite: never.
    divergence : bool
        Stop the run at its first divergent draw after the warm-up (:class:`Diverged`).
    """

    depth: float = np.inf
    long_depth: float = np.inf
    long_seconds: float = np.inf
    divergence: bool = False

    def why(self, depth: float, remaining: float) -> str | None:
        """Why a warm-up of mean ``depth`` with ``remaining`` projected seconds is stopped, or None."""
        first, last = WATCH_DRAWS
        trees = f"warm-up drew trees of mean depth {depth:.1f} over its draws {first}-{last}"
        if depth >= self.depth:
            return f"{trees} >= {self.depth:g}"
        if depth >= self.long_depth and remaining >= self.long_seconds:
            return (f"{trees} >= {self.long_depth:g}, the rest of its run projected to take "
                    f"{remaining:.0f} s >= {self.long_seconds:g} s")
        return None


class DeepWarmup(RuntimeError):
    """A watched run (:func:`~.samplers.sample_nutpie`'s ``watch``) stopped in its warm-up on deep trees.

    Attributes
    ----------
    depth : float
        The mean tree depth over the warm-up draws :data:`WATCH_DRAWS` (:func:`warmup_depth`).
    remaining : float
        The seconds the rest of the run was projected to take (:func:`remaining_seconds`).
    """

    def __init__(self, depth: float, remaining: float, why: str):
        super().__init__(why)
        self.depth, self.remaining = depth, remaining


class Diverged(RuntimeError):
    """A watched run (:func:`~.samplers.sample_nutpie`'s ``watch`` with ``divergence``) stopped at its
    first divergent draw after the warm-up.

    Attributes
    ----------
    divergences : int
        Divergent draws after the warm-up when the run was stopped.
    draws : int
        Draws after the warm-up drawn by then, over every chain.
    depth : float or None
        Their mean tree depth (None where the trace had none yet).
    seconds : float
        Seconds since the run started.
    """

    def __init__(self, divergences: int, draws: int, depth: float | None, seconds: float):
        super().__init__(f"{divergences} divergent draw{'s' * (divergences != 1)} of the first {draws} after "
                         f"the warm-up; stopped after {seconds:.0f} s")
        self.divergences, self.draws, self.depth, self.seconds = divergences, draws, depth, seconds


class _Progress:
    """nutpie's ``progress_callback``: the divergent draws after a warm-up of ``tune`` draws, and whether
    every chain has drawn all its draws, as last told. ``told`` is set at the run's end, and at its first
    divergence where ``divergence`` (the watch stops there), so that a wait on it ends at once, not at
    the next read: reads grow 4 s apart, and a run of 9 s took 12 s watched."""

    def __init__(self, tune: int, divergence: bool):
        self.tune, self.divergence, self.count, self.told = tune, divergence, 0, threading.Event()
        self.drawn = 0  # draws after the warm-up as told with ``count``: the pair is consistent

    def __call__(self, progress) -> None:
        self.count = sum(int(np.sum(np.asarray(chain.divergent_draws) >= self.tune)) for chain in progress)
        self.drawn = sum(max(int(chain.finished_draws) - self.tune, 0) for chain in progress)
        if (self.divergence and self.count) or all(c.finished_draws >= c.total_draws for c in progress):
            self.told.set()


def _stopped_at_divergence(read: xr.DataTree, told: _Progress, seconds: float) -> Diverged:
    """:class:`Diverged` for a run whose trace so far is ``read`` and of which nutpie ``told`` the
    divergences.

    The counts come from one source, the trace read or nutpie's last report, never one from each:
    the sampler runs on between the two, and a report later than the read once counted 3,003
    divergences "of the first 1,591 draws"."""
    if "sample_stats" not in read.children:
        return Diverged(told.count, told.drawn, None, seconds)
    stats = read["sample_stats"]
    drawn = np.isfinite(stats["step_size"].values)
    depth = float(stats["depth"].values[drawn].mean()) if drawn.any() else None
    divergences = int(stats["diverging"].values[drawn].sum())
    if divergences:
        return Diverged(divergences, int(drawn.sum()), depth, seconds)
    return Diverged(told.count, max(told.drawn, told.count), depth, seconds)


def warmup_depth(tree: xr.DataTree) -> float | None:
    """The mean tree depth over the warm-up draws :data:`WATCH_DRAWS` of the chains of nutpie's ``tree`` that
    have drawn them, or None while none has.

    Not of every chain: nutpie runs as many chains at a time as it has cores, so on two
    cores the last two chains start when the first two end (on an unseen problem of 1,023
    leapfrog steps per draw, waiting for them took 250 s of its 655). A trace read while
    sampling pads the chains behind, with NaN in the float statistics (the step size) and
    with 0 in the integer ones such as the depth, which a draw that diverged at its first
    step has too.
    """
    if "warmup_sample_stats" not in tree.children:
        return None
    stats = tree["warmup_sample_stats"]
    first, last = WATCH_DRAWS
    if stats.sizes["draw"] < last:
        return None
    drawn = np.isfinite(stats["step_size"].values[:, :last]).all(axis=1)
    return float(stats["depth"].values[drawn, first:last].mean()) if drawn.any() else None


def _finished(sampler) -> bool:
    try:
        return sampler.is_finished
    except TimeoutError:  # nutpie 0.16 raises this, rather than answering False, while the chains run
        return False


def _inspect(sampler) -> xr.DataTree:
    with warnings.catch_warnings():
        # ArviZ's check of the dimensions' names, fooled by a trace of fewer draws than chains so far.
        warnings.filterwarnings("ignore", message="Found chain dimension", category=UserWarning)
        return sampler.inspect()


def remaining_seconds(tree: xr.DataTree, elapsed: float, total: int) -> float:
    """The seconds the rest of a run is projected to take: ``elapsed`` for the draws in nutpie's ``tree`` so
    far (those of every chain, warm-up and after), the same per draw for the rest of ``total``.

    An overestimate where the warm-up's first draws take longer trees than the later ones: on
    five unseen problems it exceeded the whole factored run's logged seconds by 1.2-2.8× (the two
    were timed under different loads; docs/results/posterior.md).
    """
    drawn = sum(int(np.isfinite(tree[name]["step_size"].values).sum())
                for name in ("warmup_sample_stats", "sample_stats") if name in tree.children)
    return elapsed * (total - drawn) / drawn if drawn else np.inf


def sample_watched(compiled, watch: Watch, **options) -> xr.DataTree:
    """``nutpie.sample(compiled, **options)``, stopped with :class:`DeepWarmup` or :class:`Diverged` where
    ``watch`` says (see the module docstring); the tree without its warm-up groups."""
    t0 = time.perf_counter()
    progress = _Progress(options["tune"], watch.divergence)
    sampler = nutpie.sample(compiled, blocking=False, save_warmup=True, progress_callback=progress,
                            **options)
    wait, longest = WATCH_POLL
    total = options["chains"] * (options["tune"] + options["draws"])
    depth_due = np.isfinite(watch.depth) and options["tune"] >= WATCH_DRAWS[1]
    try:
        while True:
            finished = _finished(sampler)
            if depth_due and (depth := warmup_depth(read := _inspect(sampler))) is not None:
                depth_due = False
                remaining = remaining_seconds(read, time.perf_counter() - t0, total)
                if (why := watch.why(depth, remaining)) is not None:
                    raise DeepWarmup(depth, remaining, why)
            if finished or not (depth_due or watch.divergence):
                break
            if watch.divergence and progress.count:
                raise _stopped_at_divergence(_inspect(sampler), progress, time.perf_counter() - t0)
            progress.told.wait(wait)
            wait = min(1.5 * wait, longest)
        tree = sampler.wait()
    except BaseException:
        sampler.cancel()
        raise
    for name in ("warmup_posterior", "warmup_sample_stats"):
        if name in tree.children:
            del tree[name]
    return tree
