"""Uncertainty sets for the parameter: the protocol the solver talks to and the kinds that implement it.

=========================  ===================================  =========================
kind                       class                                objectives
=========================  ===================================  =========================
gram, wald, credible,      :class:`EllipsoidSet`                relaxed, exact
sandwich
draws (hull of draws)      :class:`DrawsSet`                    relaxed, exact (+ Nash)
quantile                   :class:`QuantileSet`                 relaxed
=========================  ===================================  =========================

A new kind implements ``lower_bound`` (and ``solve_exact`` if it is convex); see
:mod:`bayes_loco.sets.base`.
"""

from .base import Certificate, ConvexSet, ExactProblem, ExactSolution, PolicyStatus, UncertaintySet
from .ellipsoid import IDENTIFIED_RTOL, EllipsoidSet, wald_set
from .hull import DrawsSet
from .quantile import QuantileSet

__all__ = ["IDENTIFIED_RTOL", "Certificate", "ConvexSet", "DrawsSet", "EllipsoidSet", "ExactProblem",
           "ExactSolution", "PolicyStatus", "QuantileSet", "UncertaintySet", "wald_set"]
