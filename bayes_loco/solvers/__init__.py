"""Solvers of the sets' exact minimax problems, apart from the sets' geometry.

An :class:`~bayes_loco.sets.EllipsoidSet` reduces its exact objective to (c, g) and hands it to the
solver its :class:`~bayes_loco.ExactProblem` names (``ExactProblem.solver``), which
:func:`bayes_loco.pessimistic_policy` takes from :data:`SOLVERS` by the name a user gives
(``solver="auto"``, the default). The sets sit below the solvers and never import them; these
modules import only the set protocol's types (sets/base.py), never the policy layer.
"""

from functools import partial

from .exact import solve_reduced

#: The solvers of the ellipsoid's reduced minimax, by the name ``pessimistic_policy(..., solver=)`` takes:
#: ``"auto"`` (smoothed Newton up to ``config["newton_max"]`` identified directions, accelerated first-order
#: methods above), ``"newton"`` (smoothed Newton at any size: slower above, to about 1e-7 relative) and
#: ``"first-order"`` (the accelerated methods, Newton only where they leave a gap).
SOLVERS = {"auto": solve_reduced, "newton": partial(solve_reduced, method="newton"),
           "first-order": partial(solve_reduced, method="first-order")}

__all__ = ["SOLVERS", "solve_reduced"]
