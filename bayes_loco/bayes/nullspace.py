"""U's and V's blocks off the spans, U_⊥ and V_⊥, drawn exactly beside NUTS.

The likelihood reads U and V within the spans of the contexts and of the differences only
(:mod:`.chart`, "Spans"), and the isotropic prior keeps U_⊥ = P⊥ᵀ U and V_⊥ = Q⊥ᵀ V
independent of the rest. So where no balancing potential couples them (``prior.balance``
0) their posterior is their prior, N(0, s_U²) and N(0, s_V²) entry by entry given the scales
(the hyper-prior's draws with ``prior.hyper``), independent of everything else, and a draw
of the rest joined with an independent draw of them is a draw of the posterior:

- a full chart (r₁ = r): NUTS samples the spans' blocks alone
  (``build_chart_model(span_only=True)``), and :func:`draw_null` adds ``U_null``, ``V_null``;
- a partial chart: NUTS samples them with the rest, and :func:`draw_null` replaces its draws:
  without those prior-only dimensions beside the weak block NUTS's trajectories lengthened
  (§5.1 at q = 10, N = 10,000, 60 dimensions fewer: 34.7-35.5 leapfrog steps per draw became
  41.3-41.4);
- the factored model: NUTS samples U and V, and :func:`redraw_off_spans` replaces their
  components off the spans.

Why: sampled by NUTS, Θ's entries off the spans, U V_⊥ᵀ Q⊥ᵀ, were the slowest quantities of
a fit. NUTS's draws of each factor are antithetic (negatively autocorrelated), and their
product need not be: §5.1 at rank 1, N = 10,000 (8 × 6 × 5, d_φ = 10, the differences' span 5)
gave every coordinate of a chart an ESS of 7,000-10,000 of 4,000 draws and those entries 1,488;
with V_⊥ drawn independently, 3,700; the factored model's 1,768 became 3,066 (docs/results/posterior.md).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from . import dims as D
from .chart import ChartFrame

# The key of U_⊥'s and V_⊥'s stream beside the seed ("null" in ASCII), apart from the streams the sampler
# spawns from the seed alone.
NULL_STREAM = 0x6E756C6C


def exact_null(left_null: np.ndarray, right_null: np.ndarray, prior) -> bool:
    """Whether U_⊥ and V_⊥ (on the bases ``left_null`` P⊥, ``right_null`` Q⊥) are drawn exactly.

    Where a span is not the whole space and ``prior.balance`` is 0.
    """
    return prior.balance == 0 and bool(left_null.shape[1] or right_null.shape[1])


def _prior_draws(posterior: xr.Dataset, prior, rows: int, rank: int, scale_name: str,
                 rng: np.random.Generator) -> np.ndarray:
    """(chain, draw, rows, rank) draws of N(0, s²), s ``prior.scale`` or that draw's ``scale_name``."""
    if prior.balance > 0:
        raise ValueError("U_⊥ and V_⊥ are drawn exactly only with prior.balance = 0 (the balancing potential "
                         "couples them to the rest)")
    scale = posterior[scale_name].to_numpy()[..., None, None] if prior.hyper else prior.scale
    return scale * rng.standard_normal((posterior.sizes["chain"], posterior.sizes["draw"], rows, rank))


def draw_null(posterior: xr.Dataset, frame: ChartFrame, prior, rng: np.random.Generator) -> xr.Dataset:
    """``posterior`` (a chart's free variables by chain and draw) with ``U_null``, ``V_null`` drawn exactly.

    Added where NUTS left them out, replaced where it drew them. Each entry N(0, s²):
    s = ``prior.scale``, or with ``prior.hyper`` the same draw's ``sigma_U`` (for U_⊥) and
    ``sigma_V`` (for V_⊥). Raises where ``prior.balance`` is not 0, where the posterior is not
    U_⊥'s and V_⊥'s prior.
    """
    out = posterior.copy()
    blocks = ((D.LEFT_NULL, frame.nulls[0], D.CONTEXT_NULL, D.LEFT_SCALE),
              (D.RIGHT_NULL, frame.nulls[1], D.FEATURE_NULL, D.RIGHT_SCALE))
    for name, null, dim, scale_name in blocks:
        if null.shape[1]:
            values = _prior_draws(posterior, prior, null.shape[1], frame.rank, scale_name, rng)
            out[name] = xr.DataArray(values, dims=("chain", "draw", dim, D.RANK),
                                     coords={dim: np.arange(null.shape[1]), D.RANK: np.arange(frame.rank)})
    return out


def redraw_off_spans(posterior: xr.Dataset, left: np.ndarray, right: np.ndarray, prior,
                     rng: np.random.Generator) -> xr.Dataset:
    """``posterior`` (the factored model's U, V by chain and draw), their components off the spans redrawn.

    ``left`` P and ``right`` Q are orthonormal bases of the spans. U ← G + P Pᵀ (U − G) with G's
    entries drawn as :func:`draw_null` draws U_⊥'s: U's component within the span is NUTS's and its
    component off it, (I − P Pᵀ) G, is P⊥ U_⊥ in law, at d·m flops per column where P⊥ U_⊥ costs
    d·(d − m) (d_φ in the thousands for LLM features); V likewise with Q.
    """
    out = posterior.copy()
    for name, span, scale_name in ((D.LEFT, left, D.LEFT_SCALE), (D.RIGHT, right, D.RIGHT_SCALE)):
        if span.shape[1] < span.shape[0]:
            factor = posterior[name]
            fresh = _prior_draws(posterior, prior, span.shape[0], factor.sizes[D.RANK], scale_name, rng)
            kept = span @ np.einsum("ji,cdjk->cdik", span, factor.to_numpy() - fresh)
            out[name] = xr.DataArray(fresh + kept, dims=factor.dims, coords=factor.coords)
    return out
