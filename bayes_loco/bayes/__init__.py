"""The Bayesian road: factored priors on U, V → MAP / NUTS / VI posterior → θ_rtv → credible sets.

::

    post = bl.bayes.fit_posterior(data, rank=3, draws=1000, chains=4)
    az.summary(post.tree, var_names=["theta_rtv"])
    cs = post.credible_set(level=0.9, kind="ellipsoid")   # or "draws", "quantile"
    policy = bl.pessimistic_policy(cs, population, objective="exact")
"""

from . import dims
from .compare import compare_policies
from .credible import (
    credible_draws,
    credible_ellipsoid,
    credible_quantile,
    credible_set,
    identified_directions,
)
from .fit import Posterior, SamplerDiagnostics, available_samplers, fit_posterior
from .model import balanced_factors, build_model, model_coords, prior_draw
from .reduced import add_theta_rtv, rtv_labels, theta_rtv_array

__all__ = [
    "Posterior", "SamplerDiagnostics", "add_theta_rtv", "available_samplers", "balanced_factors",
    "build_model", "compare_policies", "credible_draws", "credible_ellipsoid", "credible_quantile",
    "credible_set", "dims", "fit_posterior", "identified_directions", "model_coords", "prior_draw",
    "rtv_labels", "theta_rtv_array",
]
