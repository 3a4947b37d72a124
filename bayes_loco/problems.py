"""What a simulation problem offers the study runner: the :class:`Problem` protocol.

A problem knows the truth Θ* and draws both the training comparisons and the
evaluation populations from it. :class:`~bayes_loco.simulate.PaperProblem` (the
paper's §5.1 simulation) and :class:`~bayes_loco.datasets.PersonalLLMProblem`
implement it; a new problem implements it and registers a builder in
:data:`bayes_loco.experiments.PROBLEMS` to be run as a study.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from .data import PreferenceData
from .population import Population


@runtime_checkable
class Problem(Protocol):
    """A data law with a known truth Θ*.

    Attributes
    ----------
    theta : ndarray, shape (d_x, d_φ)
        The true Θ*; rewards are r*(x, s, a) = xᵀ Θ* φ(s, a).
    d_x, d_phi : int
        Context and feature dimensions.
    has_global_populations : bool
        Whether :meth:`population` can draw several contexts per state
        (keywords ``contexts_per_state`` and ``context_law``), so that a global
        policy π(s) is meaningful. A problem without them (PersonalLLM: one
        context per prompt) is studied with personalised policies only.
    """

    @property
    def theta(self) -> np.ndarray: ...

    @property
    def d_x(self) -> int: ...

    @property
    def d_phi(self) -> int: ...

    @property
    def has_global_populations(self) -> bool: ...

    def sample(self, n: int, seed) -> PreferenceData:
        """``n`` comparisons with Bradley–Terry–Luce labels drawn under Θ*."""
        ...

    def population(self, n: int, seed, **options) -> Population:
        """An evaluation population ρ of ``n`` rows (or states); ``options`` are the problem's own."""
        ...

    def rewards(self, population: Population) -> np.ndarray:
        """True rewards r*(x_i, s_i, a) = x_iᵀ Θ* φ(s_i, a) of ``population``, shape (n, A)."""
        ...
