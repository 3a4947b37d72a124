"""Uncertainty sets for the parameter: the protocol the solver talks to and the kinds that implement it.

=========================  ===================================  =========================
kind                       class                                objectives
=========================  ===================================  =========================
gram, wald, credible,      :class:`EllipsoidSet`                relaxed, exact
sandwich
draws (hull of draws)      :class:`DrawsSet`                    relaxed, exact (+ Nash)
quantile                   :class:`QuantileSet`                 relaxed
=========================  ===================================  =========================

:func:`size_for_values` resizes a calibrated ellipsoid to guard only the values of
one scope's policies (:mod:`bayes_loco.sets.value`).

A new kind implements ``lower_bound`` (and ``solve_exact`` if it is convex); see
:mod:`bayes_loco.sets.base`.
"""

from .base import (
    BlockwiseSet,
    Certificate,
    ConvexSet,
    ExactProblem,
    ExactSolution,
    FeatureBlocks,
    NashSet,
    PolicyStatus,
    UncertaintySet,
    ValueRadius,
)
from .ellipsoid import EllipsoidSet, penalty_ellipsoid, wald_set
from .hull import DrawsSet
from .quantile import QuantileSet
from .value import size_for_values, value_directions, value_radius

__all__ = ["BlockwiseSet", "Certificate", "ConvexSet", "DrawsSet", "EllipsoidSet",
           "ExactProblem", "ExactSolution", "FeatureBlocks", "NashSet", "PolicyStatus", "QuantileSet",
           "UncertaintySet", "ValueRadius", "penalty_ellipsoid", "size_for_values", "value_directions",
           "value_radius", "wald_set"]
