"""The posterior's DataTree: identified quantities in ``posterior``, the factors beside it, prior and PPC.

:func:`~bayes_loco.bayes.fit_posterior` rearranges what PyMC returns into this
layout (names in :mod:`bayes_loco.bayes.dims`, shared with the frequentist trees
of :mod:`bayes_loco.trees`):

``posterior``
    The identified quantities that ArviZ diagnoses and summarises by default:
    ``theta`` = Θ (``chain, draw, context, feature``) and ``theta_rtv`` = θ_rtv
    (``chain, draw, rtv_coord``; labels ``"12 (u0, v3)"``, see
    :mod:`bayes_loco.trees`). ``az.diagnose``, ``az.summary`` and ``az.plot_*``
    with default arguments therefore never look at U and V. For MAP these are
    the Laplace draws (below); for VI, draws from the fitted approximation.
    Davidson's model (:mod:`bayes_loco.bayes.ties`) adds ``nu`` = ν
    (``chain, draw``; for MAP in ``point_estimate`` only, as the Laplace draws
    hold it at the MAP).
``factors``
    The factors U (``context × rank``), V (``feature × rank``) and, with
    ``prior.hyper``, the scales ``sigma_U``, ``sigma_V``: not identified
    (U R, V R give the same Θ), so R-hat and ESS on them mean nothing
    (docs/design.md, convention 6). For MAP, their values at the MAP. In the
    chart parametrisation (:mod:`bayes_loco.bayes.chart`) U and V are one
    representative of each Θ's orbit; the chart's own coordinates are not kept.
``point_estimate``
    MAP only: Θ and θ_rtv at the MAP (no sample dims); ``Posterior.theta`` and
    ``estimate`` of a MAP fit read it.
``sample_stats``
    NUTS only (the sampler's own names, docs/design.md, "Samplers").
``prior``
    ``theta`` and ``theta_rtv`` drawn from the prior (chain 1, ``predictive_draws``
    draws), for ``az.plot_prior_posterior``. Drawn in NumPy from the Normal (and,
    with ``prior.hyper``, HalfNormal) priors of the factors; the balancing
    potential (``prior.balance > 0``) is not part of them, and the group's
    ``attrs["note"]`` says so.
``posterior_predictive``, ``observed_data``
    Replicated labels ``y`` (``chain, draw, comparison``, Bernoulli) beside the
    observed ``y``: ``az.plot_ppc_dist``, ``az.plot_ppc_pava`` work on them.
    Davidson's model replicates its three outcomes (y ∈ {0, ½, 1}); the "half"
    quasi-likelihood generates no ties, so with it the replicates stay Bernoulli
    (the group's note says so).
``preference_probability``
    ``p`` = σ(x_tᵀ Θ Δφ_t) for the same draws (``chain, draw, comparison``): the
    posterior of each comparison's preference probability. Davidson's model:
    ``p`` = P(y = 1) + ½ P(tie) (:func:`bayes_loco.model.expected_label`) and
    ``p_tie`` = P(tie).
``log_likelihood``
    Not stored: :meth:`~bayes_loco.bayes.Posterior.with_log_likelihood` returns
    the tree with it (:mod:`bayes_loco.bayes.loocv` says why).
``constant_data``
    The comparisons (PyMC's ``pm.Data`` containers ``contexts``, ``differences``,
    ``labels``) and what each θ_rtv coordinate is (:func:`bayes_loco.trees.rtv_chart`):
    ``rtv_identified`` (bool; True where some comparison reaches it, the
    coordinates of ``Posterior.directions``), ``rtv_block``,
    ``rtv_context_direction``, ``rtv_feature_direction``.
``optimizer_result``
    MAP only: scipy's account of L-BFGS-B (from ``pm.find_MAP``).
``vi_loss``
    VI only: ``loss`` (``iteration``), the negative ELBO at every step.

The predictive groups hold N × draws numbers each, so they use a thinned subset
of the posterior draws: ``predictive_draws`` (default 500) evenly spaced
within each chain, and never more than ``config["max_predictive_values"]`` numbers
(N = 3000: 500 draws, 12 MB for ``p``; N = 100,000: 40 draws). ``predictive_draws=0``
leaves the prior and predictive groups out.

The root ``attrs`` hold netCDF-safe typed scalars (``rank``, ``method``,
``sampler``, ``chains``, ``draws``, ``k``, ``k_eff``, ``predictive_draws``,
``random_seed``, ``representation``, …) and the whole settings as JSON
(``"settings"``), so ``tree.to_netcdf`` works.
"""

from __future__ import annotations

import json

import numpy as np
import xarray as xr
from scipy.special import expit

from ..config import get_config
from ..coordinates import RTVBasis
from ..data import PreferenceData
from ..model import outcome_probabilities
from ..trees import CONSTANT_DATA, identified_coordinates, rtv_chart, sample_coords
from . import dims as D
from .margins import as_rows
from .reduced import theta_rtv_array
from .ties import BERNOULLI, DAVIDSON, likelihood_kind

#: Davidson's P(tie) in the ``preference_probability`` group.
P_TIE = "p_tie"

# The groups in the order the tree lists them.
_ORDER = (D.POSTERIOR, D.POINT_ESTIMATE, D.FACTORS, D.SAMPLE_STATS, D.PRIOR, D.POSTERIOR_PREDICTIVE,
          D.PREFERENCE_PROBABILITY, D.OBSERVED_DATA, CONSTANT_DATA, D.OPTIMIZER_RESULT, D.VI_LOSS)


def predictive_indices(chains: int, draws: int, n: int, wanted: int) -> np.ndarray:
    """Evenly spaced draw indices, the same in every chain, for at most ``wanted`` draws in all.

    Also capped so that ``n`` comparisons × the draws stay within ``config["max_predictive_values"]``.
    """
    total = min(wanted, max(1, get_config()["max_predictive_values"] // max(n, 1)), chains * draws)
    per_chain = max(1, min(draws, -(-total // chains)))  # ceil
    return np.unique(np.linspace(0, draws - 1, per_chain).round().astype(np.int64))


def preference_probabilities(theta: np.ndarray, data: PreferenceData, link=expit) -> np.ndarray:
    """p_t = σ(x_tᵀ Θ Δφ_t) for draws of Θ of shape (…, d_x, d_φ): shape (…, N), one draw at a time.

    ``link=None`` gives the margins η_t themselves.
    """
    lead = theta.shape[:-2]
    flat = theta.reshape(-1, *theta.shape[-2:])
    out = np.empty((flat.shape[0], data.n))
    for j, th in enumerate(flat):
        out[j] = np.einsum("tj,tj->t", data.contexts @ th, data.differences)
    out = out.reshape(*lead, data.n)
    return out if link is None else link(out)


def prior_theta(data: PreferenceData, rank: int, prior, draws: int, rng: np.random.Generator) -> np.ndarray:
    """Θ = U Vᵀ from the factors' Normal priors (HalfNormal scales if ``prior.hyper``): (draws, d_x, d_φ)."""
    if prior.hyper:
        s_u = np.abs(prior.scale * rng.standard_normal(draws))[:, None, None]
        s_v = np.abs(prior.scale * rng.standard_normal(draws))[:, None, None]
    else:
        s_u = s_v = prior.scale
    u = s_u * rng.standard_normal((draws, data.d_x, rank))
    v = s_v * rng.standard_normal((draws, data.d_phi, rank))
    return u @ v.transpose(0, 2, 1)


def _theta_array(values: np.ndarray, chains_draws: dict, like: xr.DataArray) -> xr.DataArray:
    coords = chains_draws | {dim: like.coords[dim].values for dim in (D.CONTEXT, D.FEATURE)}
    return xr.DataArray(values, dims=(*chains_draws, D.CONTEXT, D.FEATURE), coords=coords)


def _identified_group(theta: xr.DataArray, basis: RTVBasis, attrs) -> xr.Dataset:
    return xr.Dataset({D.THETA: theta, D.THETA_RTV: theta_rtv_array(theta, basis)}, attrs=attrs)


def arrange(raw: xr.DataTree, *, method: str, basis: RTVBasis, directions: np.ndarray, data: PreferenceData,
            ties: str, prior, predictive_draws: int, seed: int, root_attrs: dict | None = None,
            laplace: xr.DataArray | None = None, loss: np.ndarray | None = None) -> xr.DataTree:
    """The tree of the module docstring from PyMC's (``raw``); ``raw`` is left as it was.

    ``laplace``: for MAP, the Laplace draws of Θ (chain 1); ``loss``: for VI, the loss history;
    ``root_attrs``: the root's attrs (:func:`root_attrs`; the fit writes them once its settings are known).
    """
    identified = identified_coordinates(directions)
    source = raw[D.POSTERIOR].to_dataset(inherit=False)
    theta = source[D.THETA]
    groups: dict[str, xr.Dataset] = {}
    # U, V and the scales; not the chart parametrisation's own coordinates, which are a device of the sampler.
    factors = source[[v for v in (D.LEFT, D.RIGHT, D.LEFT_SCALE, D.RIGHT_SCALE) if v in source.data_vars]]
    factors.attrs = {**source.attrs,
                     "note": "U and V are not identified (U R, V R give the same Θ): R-hat and ESS on them "
                             "mean nothing; diagnose the posterior group"}
    nu = source[D.NU] if D.NU in source.data_vars else None
    if method == "map":
        point = theta.isel({"chain": 0, "draw": 0}, drop=True)
        groups[D.POSTERIOR] = _identified_group(laplace, basis, {
            **source.attrs, "representation": "Laplace approximation at the MAP (see Posterior)"})
        groups[D.POINT_ESTIMATE] = xr.Dataset({D.THETA: point,
                                               D.THETA_RTV: theta_rtv_array(point, basis)},
                                              attrs={"description": "the MAP estimate"})
        if nu is not None:
            groups[D.POINT_ESTIMATE][D.NU] = nu.isel({"chain": 0, "draw": 0}, drop=True)
    else:
        groups[D.POSTERIOR] = _identified_group(theta, basis, source.attrs)
        if nu is not None:
            groups[D.POSTERIOR][D.NU] = nu
    groups[D.FACTORS] = factors
    for name in (D.SAMPLE_STATS, D.OBSERVED_DATA, CONSTANT_DATA, D.OPTIMIZER_RESULT):
        if name in raw.children and raw[name].to_dataset(inherit=False).data_vars:
            groups[name] = raw[name].to_dataset(inherit=False)
    chart = rtv_chart(basis, identified)
    if CONSTANT_DATA in groups:
        chart = as_rows(groups[CONSTANT_DATA], data).merge(chart)
    groups[CONSTANT_DATA] = chart
    if loss is not None:
        groups[D.VI_LOSS] = xr.Dataset(
            {D.LOSS: xr.DataArray(np.asarray(loss, dtype=float), dims=(D.ITERATION,),
                                  coords={D.ITERATION: np.arange(len(loss))},
                                  attrs={"description": "negative ELBO (PyMC's loss) at every iteration"})})
    if predictive_draws > 0:
        nu_draws = groups[D.POSTERIOR].get(D.NU)
        if nu_draws is None and nu is not None:  # MAP: ν held at the MAP for every Laplace draw
            nu_draws = xr.full_like(laplace.isel({D.CONTEXT: 0, D.FEATURE: 0}, drop=True),
                                    float(groups[D.POINT_ESTIMATE][D.NU]))
        groups |= _predictive_groups(groups[D.POSTERIOR][D.THETA], basis, data, ties, prior,
                                     predictive_draws, seed, raw, nu_draws)
    ordered = {"/": xr.Dataset(attrs=root_attrs or {})}
    ordered |= {name: groups[name] for name in _ORDER if name in groups}
    return xr.DataTree.from_dict(ordered)


def _davidson_replicates(theta: xr.DataArray, nu: xr.DataArray, data: PreferenceData, u: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Davidson's replicated labels (0, ½, 1 from the uniforms ``u``), E[y] and P(tie) for each draw."""
    eta = preference_probabilities(np.asarray(theta.values, dtype=float), data, link=None)
    probs = outcome_probabilities(eta, np.asarray(nu.values, dtype=float)[..., None])
    y = np.where(u < probs[..., 0], 0.0, np.where(u < probs[..., 0] + probs[..., 1], 0.5, 1.0))
    return y, probs[..., 2] + 0.5 * probs[..., 1], probs[..., 1]


def _predictive_groups(theta: xr.DataArray, basis, data: PreferenceData, ties: str, prior, wanted: int,
                       seed: int, raw: xr.DataTree, nu: xr.DataArray | None) -> dict[str, xr.Dataset]:
    rng = np.random.default_rng([seed, 20250101])
    chains, draws = theta.sizes["chain"], theta.sizes["draw"]
    idx = predictive_indices(chains, draws, data.n, wanted)
    thinned = theta.isel(draw=idx)
    kind = likelihood_kind(data, ties)
    if kind == DAVIDSON:
        y, p, p_tie = _davidson_replicates(thinned, nu.isel(draw=idx), data, rng.random((*thinned.shape[:2],
                                                                                            data.n)))
    else:
        p = preference_probabilities(np.asarray(thinned.values, dtype=float), data)
        y = (rng.random(p.shape) < p).astype(np.int64)
    comparison = (raw[D.OBSERVED_DATA][D.OBSERVED].coords[D.COMPARISON].values
                  if D.OBSERVED_DATA in raw.children else np.arange(data.n))
    coords = {"chain": thinned.coords["chain"].values, "draw": thinned.coords["draw"].values,
              D.COMPARISON: comparison}
    dims = ("chain", "draw", D.COMPARISON)
    note = (f"{idx.size} of every chain's {draws} draws, evenly spaced (predictive_draws={wanted}, "
            f"at most {get_config()["max_predictive_values"]} numbers)")
    replicated = "replicated labels y_t ~ Bernoulli(p_t)"
    probability = "p_t = σ(x_tᵀ Θ Δφ_t): the probability that comparison t prefers a_t1"
    if kind == DAVIDSON:
        replicated = "replicated labels y_t ∈ {0, ½, 1} from Davidson's model at (Θ, ν)"
        probability = ("p_t = P(y_t = 1) + ½ P(tie): the probability that a_t1 is preferred, a tie counting "
                       "half")
    elif kind != BERNOULLI:
        replicated += " (the 'half' quasi-likelihood generates no ties)"
    groups = {
        D.POSTERIOR_PREDICTIVE: xr.Dataset(
            {D.OBSERVED: xr.DataArray(y, dims=dims, coords=coords, attrs={"description": replicated})},
            attrs={"note": note}),
        D.PREFERENCE_PROBABILITY: xr.Dataset(
            {D.PROBABILITY: xr.DataArray(p, dims=dims, coords=coords, attrs={"description": probability})},
            attrs={"note": note}),
    }
    if kind == DAVIDSON:
        groups[D.PREFERENCE_PROBABILITY][P_TIE] = xr.DataArray(
            p_tie, dims=dims, coords=coords, attrs={"description": "P(tie) under Davidson's model"})
    n_prior = min(wanted, chains * draws)
    prior_values = prior_theta(data, basis.rank, prior, n_prior, rng)[None]
    prior_note = ("draws from the Normal priors of U and V"
                  + (" with HalfNormal scales" if prior.hyper else "")
                  + ("; the balancing potential is not included" if prior.balance > 0 else ""))
    groups[D.PRIOR] = _identified_group(_theta_array(prior_values, sample_coords(1, n_prior), theta), basis,
                                        {"note": prior_note})
    if kind == DAVIDSON:
        groups[D.PRIOR][D.NU] = xr.DataArray(np.exp(prior.nu_scale * rng.standard_normal((1, n_prior))),
                                           dims=("chain", "draw"), coords=sample_coords(1, n_prior),
                                           attrs={"description": "ν from its prior, log ν ~ N(0, nu_scale²)"})
    return groups


def root_attrs(settings: dict, version: str, *, sampler: str, chains: int, draws: int, k: int, k_eff: int,
               representation: str, predictive_draws: int) -> dict:
    """Attrs for the DataTree: typed scalars netCDF can hold, and the whole settings as JSON.

    The settings hold bools, None and nested groups, which netCDF attributes cannot;
    as one JSON string they survive ``tree.to_netcdf`` and ``json.loads`` restores them typed.
    """
    return {"bayes_loco_version": version, "model": "factored contextual BTL", "rank": settings["rank"],
            "method": settings["method"], "sampler": sampler, "representation": representation,
            "chains": int(chains), "draws": int(draws), "k": int(k), "k_eff": int(k_eff),
            "predictive_draws": int(predictive_draws), "random_seed": settings["random_seed"],
            "settings": json.dumps(settings)}
