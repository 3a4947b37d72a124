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

from .. import linalg as _linalg
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

#: A feature vector z with a component outside range(W) larger than this share of ‖z‖ is not
#: identified: every set's lower bound of θᵀz is −∞ there (the set is a cylinder along it).
IDENTIFIED_RTOL = _linalg.IDENTIFIED_RTOL

__all__ = ["IDENTIFIED_RTOL", "BlockwiseSet", "Certificate", "ConvexSet", "DrawsSet", "EllipsoidSet",
           "ExactProblem", "ExactSolution", "FeatureBlocks", "NashSet", "PolicyStatus", "QuantileSet",
           "UncertaintySet", "ValueRadius", "penalty_ellipsoid", "size_for_values", "value_directions",
           "value_radius", "wald_set"]
