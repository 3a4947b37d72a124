"""The Bayesian road: factored priors on U, V → MAP / NUTS / VI posterior → θ_rtv → credible sets.

::

    post = bl.bayes.fit_posterior(data, rank=3, nuts={"draws": 1000, "chains": 4})
    print(post.summary())                      # identified coordinates of θ_rtv, R-hat, ESS
    cs = post.calibrated_set(level=0.9, kind="credible")   # or "sandwich", "draws", "quantile"
    policy = bl.pessimistic_policy(cs, population, objective="exact")

A :class:`Posterior` is a :class:`bayes_loco.results.Fit` like the frequentist
fits: ``theta`` (the posterior mean), ``estimate`` (θ_rtv's posterior mean),
``penalty_set``, ``calibrated_set``, ``diagnostics`` and ``summary``.
:func:`fit_posterior`'s settings come in groups: :class:`Prior`,
:class:`NUTS` and :class:`VI` (each also as a dict of its fields).

Choices, and why (measured on the paper's simulation, d_x = 20, d_φ = 29, r = 3):

- NUTS moves in the identified chart of :mod:`.chart` when the data fix every
  component (``nuts={"parametrization": "auto"}``, the default): the same
  posterior of Θ as the factored model, without the rotation and scale ridges
  that make its leapfrog steps per draw grow like √N.
- U and V are left free (no balancing potential): on N = 3000 the potential
  −(c/8)‖UᵀU − VᵀV‖² with c = 1 gave no consistent gain in ESS or tree depth
  (see :func:`build_model`). R-hat and ESS are reported on Θ and θ_rtv only.
- Every fit starts at the balanced factors of the frequentist low-rank fit
  (the origin is a saddle; chains started elsewhere disagree at large N).
- Credible sets are restricted to the k_eff directions of θ_rtv that the data
  identify (78 of 138 there), as the Wald set is; see :mod:`.credible`.
- nutpie is the default sampler (a dependency): at N = 3000 it takes half the
  wall time of PyMC's NUTS for about the same ESS per second (6.3 against 5.5);
  pass ``nuts={"sampler": "pymc"}`` to avoid its ~10 s numba compilation on
  small problems (docs/design.md, "Samplers").
- Ties and weights (``ties="half"`` or ``"davidson"``): see :mod:`.ties`; the
  pointwise log-likelihood for ``az.loo``/``az.compare`` is computed on demand
  (``post.with_log_likelihood()``, :func:`loo`; :mod:`.loocv`; :func:`compare_ranks`, :mod:`.ranks`).
- The DataTree (``post.tree``) holds the identified quantities only in
  ``posterior`` (Θ, θ_rtv), the factors in ``factors``, a ``prior``, a
  posterior predictive with ``observed_data``, and the method's own groups:
  see :mod:`.layout`. The frequentist fits export the same layout
  (``fit.to_datatree()``, :mod:`bayes_loco.trees`).
"""

from . import chart, dims, ties
from .chart import ChartFrame, build_chart_model, chart_frame
from .credible import (
    credible_cvar,
    credible_draws,
    credible_ellipsoid,
    credible_family,
    credible_quantile,
    credible_set,
)
from .fit import fit_posterior
from .laplace import laplace_theta
from .loocv import LOOResult, log_likelihood, loo, with_log_likelihood
from .model import balanced_factors, build_model, model_coords, prior_draw
from .posterior import Posterior
from .ranks import RankComparison, compare_ranks
from .reduced import add_theta_rtv, theta_rtv_array
from .samplers import available_samplers
from .settings import MAP, NUTS, VI, Prior

__all__ = [
    "MAP", "NUTS", "VI", "ChartFrame", "LOOResult", "Posterior", "Prior", "RankComparison", "add_theta_rtv",
    "available_samplers", "balanced_factors", "build_chart_model", "build_model", "chart", "chart_frame",
    "compare_ranks", "credible_cvar", "credible_draws", "credible_ellipsoid", "credible_family",
    "credible_quantile",
    "credible_set", "dims", "fit_posterior", "laplace_theta", "log_likelihood", "loo", "model_coords",
    "prior_draw", "theta_rtv_array", "ties", "with_log_likelihood",
]
