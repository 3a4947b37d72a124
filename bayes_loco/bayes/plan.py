"""The sampler's choices as a plan: each NUTS attempt of a fit, the settings it runs with, and why.

:func:`~.geometry.choose_geometry` picks the coordinates of the first attempt from the data and the
settings, and :func:`~.geometry.fallbacks` the ones that follow a troubled run (docs/design.md,
"The chart parametrisation"). Each becomes an :class:`Attempt` here: its parametrisation, chart rank,
``target_accept``, draws and tuning, mass-matrix adaptation, why it runs (``when``) and the
geometry's reason. The fit runs the attempts in a straight line, each with the settings it states
(:meth:`Attempt.settings`, a new :class:`~.settings.NUTS`): the user's own settings object is never
rewritten. ``post.settings["plan"]`` records every attempt that ran, with its diagnostics, and which
was kept; ``post.summary()`` prints it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .settings import NUTS

#: Why an attempt runs: the first, or the trouble of the run before it.
FIRST = "first"
DIVERGED = "the run before diverged"
RHAT = "the run before missed R-hat"
DEEP_WARMUP = "the run before was stopped in its warm-up"
SHORT_ESS = "the run before was short of ESS"
#: The mass-matrix adaptation of every attempt: the samplers' own diagonal one (nutpie's and PyMC's
#: default); nutpie's low-rank adaptation did not pay on the default run (docs/results/posterior.md).
ADAPTATION = "diagonal"


@dataclass(frozen=True)
class Attempt:
    """One NUTS run of a fit's plan.

    Attributes
    ----------
    parametrization : {"chart", "factored"}
    chart_rank : int or None
        r₁ of a chart; None for the factored model.
    target_accept : float
    draws, tune : int
        Per chain.
    adaptation : str
        The mass-matrix adaptation.
    when : str
        Why it runs: :data:`FIRST`, or the trouble of the run before it.
    reason : str
        Why these coordinates (the geometry's reason).
    """

    parametrization: str
    chart_rank: int | None
    target_accept: float
    draws: int
    tune: int
    adaptation: str
    when: str
    reason: str

    def settings(self, nuts: NUTS) -> NUTS:
        """The NUTS settings this attempt runs with: ``nuts`` (the user's) with the attempt's own
        coordinates, target and length; a new object, ``nuts`` unchanged."""
        return dataclasses.replace(nuts, parametrization=self.parametrization, chart_rank=self.chart_rank,
                                   target_accept=self.target_accept, draws=self.draws, tune=self.tune)

    def record(self) -> dict:
        """The attempt as ``post.settings["plan"]`` holds it (JSON)."""
        return dataclasses.asdict(self)


def attempt(geometry, nuts: NUTS, when: str = FIRST) -> Attempt:
    """The attempt that runs NUTS in ``geometry``'s coordinates (:class:`~.geometry.Geometry`), from the
    user's ``nuts``: its target (the geometry's where it sets one), its draws scaled by the geometry's
    ``draws_scale`` and, for a lengthened run, twice the draws and tuning
    (:func:`~.diagnostics.lengthened`).

    Examples
    --------
    >>> from bayes_loco.bayes import geometry, plan
    >>> first = plan.attempt(geometry.Geometry(None, "no component determined", True), bl.bayes.NUTS())
    >>> first.parametrization, first.target_accept, first.draws, first.when
    ('factored', 0.9, 1000, 'first')
    """
    draws = round(geometry.draws_scale * nuts.draws)
    tune = nuts.tune
    if geometry.lengthened:
        draws, tune = 2 * draws, 2 * max(tune, draws)
    return Attempt(geometry.parametrization, geometry.chart_rank, geometry.target(nuts), draws, tune,
                   ADAPTATION, when, geometry.reason)


def trouble(diagnostics, rhat_max: float) -> str:
    """Why the run with ``diagnostics`` is followed by another: it diverged, or it missed R-hat."""
    if diagnostics.divergences:
        return DIVERGED
    return RHAT if not diagnostics.max_rhat <= rhat_max else SHORT_ESS


def plan_record(attempts: list[Attempt], diagnostics: list, kept: int,
                stopped: dict | None = None) -> dict:
    """``post.settings["plan"]``: every attempt that ran, in order, with its divergences, R-hat and ESS,
    and the index of the one kept. ``stopped``: the record of a first attempt stopped in its warm-up
    (no draws), listed first."""
    rows = [] if stopped is None else [{**stopped, "divergences": None, "max_rhat": None,
                                        "min_ess_bulk": None, "stopped": True}]
    kept += len(rows)
    for planned, d in zip(attempts, diagnostics, strict=True):
        rows.append({**planned.record(), "divergences": int(d.divergences or 0),
                     "max_rhat": None if d.max_rhat is None else float(d.max_rhat),
                     "min_ess_bulk": None if d.min_ess_bulk is None else float(d.min_ess_bulk)})
    return {"attempts": rows, "kept": int(kept)}


def plan_notes(settings: dict) -> list[str]:
    """The plan of a fit's ``settings`` as the lines ``summary()`` prints, the kept attempt marked."""
    plan = settings.get("plan")
    if not plan:
        return []
    lines = []
    for i, a in enumerate(plan["attempts"]):
        coords = a["parametrization"] + (f" r₁ = {a['chart_rank']}" if a["chart_rank"] else "")
        mark = " (kept)" if i == plan["kept"] else " (stopped in its warm-up)" if a.get("stopped") else ""
        lines.append(f"Attempt {i + 1}{mark}: {coords}, target_accept {a['target_accept']:g}, "
                     f"{a['tune']} + {a['draws']} draws, {a['adaptation']} mass matrix; {a['when']}")
    return lines
