"""The chart's blocks off the spans, U_⊥ and V_⊥, drawn exactly beside NUTS.

The likelihood reads U and V within the spans of the contexts and of the differences only
(:mod:`.chart`, "Spans"), and the isotropic prior keeps U_⊥ = P⊥ᵀ U and V_⊥ = Q⊥ᵀ V
independent of the rest. So where no balancing potential couples them (``prior.balance``
0) their posterior is their prior, N(0, s_U²) and N(0, s_V²) entry by entry given the scales
(the hyper-prior's draws with ``prior.hyper``), independent of everything else. In a full
chart (:func:`exact_null` says where) NUTS then samples the spans' blocks alone
(``build_chart_model(span_only=True)``), and :func:`draw_null` adds U_⊥ and V_⊥ as
independent draws before the Deterministics are computed.

Why: sampled by NUTS with the rest, Θ's entries off the spans, U V_⊥ᵀ Q⊥ᵀ, were the slowest
quantities of a chart. NUTS's draws of each factor are antithetic (negatively autocorrelated),
and their product need not be: §5.1 at rank 1, N = 10,000
(8 × 6 × 5, d_φ = 10, the differences' span 5) gave every factor an ESS of 7,000-10,000 of 4,000
draws and those entries 1,488; with V_⊥ drawn independently, 3,700 (docs/results.md, "The blocks
off the spans drawn exactly").
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from . import dims as D
from .chart import ChartFrame

# The key of U_⊥'s and V_⊥'s stream beside the seed ("null" in ASCII), apart from the streams the sampler
# spawns from the seed alone.
NULL_STREAM = 0x6E756C6C


def exact_null(frame: ChartFrame | None, prior) -> bool:
    """Whether a fit in ``frame``'s chart draws U_⊥ and V_⊥ exactly (:func:`draw_null`).

    Where a full chart (r₁ = r) has a block off a span and ``prior.balance`` is 0. Never for the
    factored model (``frame`` None), whose U and V are not split by span, nor for a partial chart:
    its slowest quantities are the weak block's, and without U_⊥, V_⊥ beside them NUTS's
    trajectories lengthened (§5.1 at q = 10, N = 10,000, 60 prior-only dimensions fewer: 34.7-35.5
    leapfrog steps per draw became 41.3-41.4, past issue #32's 40, for an ESS per second within
    ±12 %).
    """
    if frame is None or prior.balance > 0 or frame.weak_rank:
        return False
    return bool(frame.left_null.shape[1] or frame.right_null.shape[1])


def draw_null(posterior: xr.Dataset, frame: ChartFrame, prior, rng: np.random.Generator) -> xr.Dataset:
    """``posterior`` (the spans' free variables by chain and draw) with U_⊥, V_⊥ drawn from their posterior.

    Each entry N(0, s²): s = ``prior.scale``, or with ``prior.hyper`` the same draw's
    ``sigma_U`` (for U_⊥) and ``sigma_V`` (for V_⊥). Raises where ``prior.balance`` is not 0,
    where the posterior is not U_⊥'s and V_⊥'s prior.
    """
    if prior.balance > 0:
        raise ValueError("U_⊥ and V_⊥ are drawn exactly only with prior.balance = 0 (the balancing potential "
                         "couples them to the rest)")
    shape = (posterior.sizes["chain"], posterior.sizes["draw"])
    out = posterior.copy()
    blocks = ((D.LEFT_NULL, frame.left_null, D.CONTEXT_NULL, D.LEFT_SCALE),
              (D.RIGHT_NULL, frame.right_null, D.FEATURE_NULL, D.RIGHT_SCALE))
    for name, null, dim, scale_name in blocks:
        if not null.shape[1]:
            continue
        scale = posterior[scale_name].to_numpy()[..., None, None] if prior.hyper else prior.scale
        values = scale * rng.standard_normal((*shape, null.shape[1], frame.rank))
        out[name] = xr.DataArray(values, dims=("chain", "draw", dim, D.RANK),
                                 coords={dim: np.arange(null.shape[1]), D.RANK: np.arange(frame.rank)})
    return out
