"""Solvers of the sets' exact minimax problems, apart from the sets' geometry.

An :class:`~bayes_loco.sets.EllipsoidSet` reduces its exact objective to (c, g) and hands it to
:func:`~bayes_loco.solvers.exact.solve_reduced` (smoothed Newton, :mod:`.newton`, or accelerated
first-order methods, :mod:`.first_order`), which registers itself in
:data:`bayes_loco.sets.base.MINIMAX_SOLVERS` as "ball": the sets sit below the solvers and never
import them. These modules import only the set protocol's types (sets/base.py), never the policy
layer; policy.py imports them, so they are registered whenever the package is.
"""

from .exact import NEWTON_FALLBACK_MAX, NEWTON_MAX, solve_reduced

__all__ = ["NEWTON_FALLBACK_MAX", "NEWTON_MAX", "solve_reduced"]
