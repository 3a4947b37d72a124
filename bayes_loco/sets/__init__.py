"""Uncertainty sets for the parameter: the protocol the solver talks to and the kinds that implement it.

=========================  ===================================  =========================
kind                       class                                objectives
=========================  ===================================  =========================
gram, wald, credible,      :class:`EllipsoidSet`                relaxed, exact
sandwich
draws (hull of draws)      :class:`DrawsSet`                    relaxed, exact (+ Nash)
quantile                   :class:`QuantileSet`                 relaxed
family (row x action       :class:`ValueFamilySet`              relaxed
values of one population)
=========================  ===================================  =========================

:func:`size_for_values` resizes a calibrated ellipsoid to guard only the values of
one scope's policies (:mod:`bayes_loco.sets.value`); :func:`value_family` bounds only the finite
family of one population's row × action values, simultaneously (:mod:`bayes_loco.sets.family`).

A new kind implements ``lower_bound`` (and ``solve_exact`` if it is convex); see
:mod:`bayes_loco.sets.base`.
"""

from .base import (
    BlockwiseSet,
    Certificate,
    ConvexSet,
    ExactProblem,
    ExactSolution,
    FamilySet,
    FeatureBlocks,
    NashSet,
    PolicyStatus,
    UncertaintySet,
    ValueRadius,
)
from .ellipsoid import EllipsoidSet, penalty_ellipsoid, wald_set
from .family import ValueFamilySet, bonferroni_critical, draw_ranks, draws_family, max_rank, value_family
from .hull import DrawsSet
from .quantile import QuantileSet
from .value import size_for_values, value_directions, value_radius

__all__ = ["BlockwiseSet", "Certificate", "ConvexSet", "DrawsSet", "EllipsoidSet",
           "ExactProblem", "ExactSolution", "FamilySet", "FeatureBlocks", "NashSet", "PolicyStatus",
           "QuantileSet", "UncertaintySet", "ValueFamilySet", "ValueRadius", "bonferroni_critical",
           "draw_ranks", "draws_family", "max_rank", "penalty_ellipsoid", "size_for_values",
           "value_directions", "value_family", "value_radius", "wald_set"]
