"""Posterior fits of the factored model: MAP, NUTS and ADVI, all started at the frequentist fit.

The start matters (DESIGN.md, conventions 5 and 6): U = V = 0 is a saddle of the
factored posterior, and chains started elsewhere than near the MLE's rank-r SVD
did not agree at large N. Every method here starts from the balanced factors of
:func:`bayes_loco.fit_low_rank` and diagnoses only identified quantities (Θ and
θ_rtv in the RTV coordinates of a fixed reference fit).
"""

from __future__ import annotations

import importlib.util
import time
import warnings
from dataclasses import dataclass, field
from functools import cached_property

import arviz as az
import numpy as np
import pandas as pd
import pymc as pm
import xarray as xr

from .._validation import check_int, check_option, check_rank, check_real
from ..coordinates import RTVBasis, identified_directions, rtv_basis
from ..data import PreferenceData
from ..exceptions import SamplerWarning
from ..frequentist.fgd import LowRankResult, fit_low_rank
from ..model import fisher_information, margins
from . import dims as D
from .credible import KINDS, credible_set
from .model import balanced_factors, build_model
from .reduced import add_theta_rtv, draws_moments, stacked_draws

METHODS = ("nuts", "map", "vi")
COVARIANCES = ("posterior", "sandwich")
NUTS_SAMPLERS = ("pymc", "nutpie", "numpyro")
VI_METHODS = ("advi", "fullrank_advi")
# Sampler-stat names differ between the NUTS implementations (PYMC6-ARVIZ1.md §2).
_DEPTH_STATS = ("tree_depth", "depth")
_MAXDEPTH_STATS = ("reached_max_treedepth", "maxdepth_reached")


def available_samplers() -> tuple[str, ...]:
    """The NUTS implementations installed here: always ``"pymc"``, then nutpie and numpyro if present."""
    found = ["pymc"]
    if importlib.util.find_spec("nutpie") is not None:
        found.append("nutpie")
    if importlib.util.find_spec("numpyro") is not None and importlib.util.find_spec("jax") is not None:
        found.append("numpyro")
    return tuple(found)


def _jax_chain_method(chains: int) -> str:
    """numpyro's ``chain_method``: one chain per device when there are enough, else vectorized.

    With fewer JAX devices than chains (one GPU, or a CPU), "parallel" falls back to
    drawing the chains one after another; "vectorized" advances them together, which
    on a GPU costs about what one chain does.
    """
    import jax

    return "parallel" if jax.local_device_count() >= chains else "vectorized"


@dataclass(frozen=True)
class SamplerDiagnostics:
    """What a user asks of a posterior fit before trusting it.

    Attributes
    ----------
    method : {"nuts", "map", "vi"}
    sampler : str
        ``"pymc"``, ``"nutpie"``, ``"numpyro"``, ``"advi"``, ``"fullrank_advi"`` or ``"L-BFGS-B"``.
    seconds : float
        Wall time of the sampler / optimiser call (model compilation included).
    divergences : int or None
        Divergent transitions after tuning (NUTS only).
    max_depth_hits : int or None
        Transitions that hit the maximum tree depth (NUTS only).
    mean_tree_depth : float or None
    max_rhat, min_ess_bulk, min_ess_tail : float
        Over every entry of the identified quantities Θ and θ_rtv (NaN where
        undefined: one chain, or a point estimate).
    summary : pandas.DataFrame or None
        ``az.summary(tree, var_names=["theta_rtv"], kind="diagnostics")``.
    messages : tuple of str
        The warnings that were issued.
    """

    method: str
    sampler: str
    seconds: float
    divergences: int | None = None
    max_depth_hits: int | None = None
    mean_tree_depth: float | None = None
    max_rhat: float = np.nan
    min_ess_bulk: float = np.nan
    min_ess_tail: float = np.nan
    summary: pd.DataFrame | None = field(default=None, repr=False)
    messages: tuple[str, ...] = ()

    @property
    def ess_per_second(self) -> float:
        """min bulk ESS over identified quantities per second of sampling."""
        return self.min_ess_bulk / self.seconds if self.seconds > 0 else np.nan


@dataclass(frozen=True, eq=False)
class Posterior:
    """A posterior fit of the factored model and its reduced coordinates.

    Attributes
    ----------
    tree : xarray.DataTree
        ArviZ DataTree. Its ``posterior`` holds ``U`` (context × rank), ``V``
        (feature × rank), ``theta`` = Θ (context × feature) and ``theta_rtv`` =
        θ_rtv (rtv_coord); diagnose the last two, not U and V. NUTS fits also
        carry ``sample_stats``; every fit ``observed_data``.
    model : pymc.Model
        The model of :func:`~bayes_loco.bayes.build_model` (reusable with ``pm.set_data``).
    basis : RTVBasis
        Û, V̂ and r of the reference fit defining θ_rtv.
    start : LowRankResult
        The frequentist low-rank fit the sampler/optimiser started from.
    directions : ndarray, shape (k, k_eff)
        Orthonormal basis of the θ_rtv directions the data identify (range of
        the reduced design's Gram matrix); credible sets are restricted to them.
    diagnostics : SamplerDiagnostics
    method : {"nuts", "map", "vi"}
    data : PreferenceData
    settings : dict
        The arguments of the fit (rank, priors, sampler, draws, …).
    """

    tree: xr.DataTree
    model: pm.Model
    basis: RTVBasis
    start: LowRankResult
    directions: np.ndarray
    diagnostics: SamplerDiagnostics
    method: str
    data: PreferenceData
    settings: dict

    @property
    def rank(self) -> int:
        return self.basis.rank

    @property
    def k(self) -> int:
        """k = (d_x + d_φ) r − r², the number of RTV coordinates."""
        return self.basis.dim

    @property
    def k_eff(self) -> int:
        """Number of identified directions of θ_rtv."""
        return self.directions.shape[1]

    @cached_property
    def theta_draws(self) -> np.ndarray:
        """Draws of Θ, shape (J, d_x, d_φ), chains concatenated."""
        return stacked_draws(self.tree, D.THETA)

    @cached_property
    def rtv_draws(self) -> np.ndarray:
        """Draws of θ_rtv, shape (J, k), chains concatenated."""
        return stacked_draws(self.tree, D.THETA_RTV)

    @property
    def theta_mean(self) -> np.ndarray:
        """Posterior mean of Θ (d_x × d_φ); for MAP, the MAP estimate."""
        return self.theta_draws.mean(axis=0)

    @property
    def rtv_mean(self) -> np.ndarray:
        """Posterior mean of θ_rtv (k,)."""
        return self.rtv_draws.mean(axis=0)

    @property
    def rtv_covariance(self) -> np.ndarray:
        """Posterior covariance of θ_rtv (k × k); needs draws (not MAP)."""
        self._need_draws("rtv_covariance")
        return draws_moments(self.rtv_draws)[1]

    def _need_draws(self, what):
        if self.method == "map" or self.rtv_draws.shape[0] < 2:
            raise ValueError(f"{what} needs posterior draws, but this fit has method={self.method!r} "
                             "(a point estimate); fit with method='nuts' or 'vi'")

    def credible_set(self, level: float = 0.9, kind: str = "ellipsoid", *, identified: bool = True,
                     covariance: str = "posterior"):
        """A credible set for θ_rtv that :func:`bayes_loco.pessimistic_policy` accepts.

        Parameters
        ----------
        level : float
            Credible level in (0, 1).
        kind : {"ellipsoid", "draws", "quantile"}
            ``"ellipsoid"``: Gaussian credible ellipsoid around the posterior
            mean with W = inverse posterior covariance of the identified
            directions and R² = χ²_{k_eff}(level) (an EllipsoidSet, kind
            "credible"; both objectives). ``"draws"``: the convex hull of the
            ``level`` fraction of draws with the smallest Mahalanobis distance
            (a DrawsSet; both objectives). ``"quantile"``: the pointwise
            (1 − level) posterior quantile of θᵀz (a QuantileSet; relaxed
            objective only). See :mod:`bayes_loco.bayes.credible` for what each
            guarantees.
        identified : bool
            Restrict the ellipsoid and the Mahalanobis distance to the
            directions the data identify (default; see
            :mod:`bayes_loco.bayes.credible`); False uses all k directions.
        covariance : {"posterior", "sandwich"}
            The ellipsoid's shape: the posterior covariance Σ (a credible set),
            or the sandwich Σ F Σ with F the Fisher information at the posterior
            mean Θ̄ (a confidence set for θ_rtv centred at θ̄; kind ``"sandwich"``).
            Near a low-rank Θ* the posterior is wider than the error of its mean
            and the credible set over-covers; docs/results.md measures both.
        """
        check_option(kind, "kind", KINDS)
        check_option(covariance, "covariance", COVARIANCES)
        self._need_draws("credible_set")
        information = self.information() if covariance == "sandwich" else None
        return credible_set(self.rtv_draws, self.basis, level, kind,
                            directions=self.directions if identified else None, information=information)

    def information(self) -> np.ndarray:
        """Fisher information of θ_rtv at the posterior mean, Σ_t p̄_t(1 − p̄_t) z_t z_tᵀ (k × k).

        p̄_t uses the posterior mean Θ̄ itself, x_tᵀ Θ̄ Δφ_t, not its reduction
        (Θ̄ has a component outside the reduced subspace).
        """
        data = self.data
        z = self.basis.transform(data.contexts, data.differences)
        return fisher_information(z, margins(self.theta_mean, data.contexts, data.differences))

    def summary(self, var_names=(D.THETA_RTV,), **kwargs) -> pd.DataFrame:
        """``az.summary`` of the identified quantities (``theta_rtv`` by default)."""
        return az.summary(self.tree, var_names=list(var_names), **kwargs)

    def __repr__(self) -> str:
        d = self.diagnostics
        draws = self.rtv_draws.shape[0]
        extra = ""
        if self.method == "nuts":
            extra = (f", divergences={d.divergences}, max R-hat={d.max_rhat:.4f}, "
                     f"min ESS bulk={d.min_ess_bulk:.0f}")
        return (f"Posterior(method={self.method!r}, sampler={d.sampler!r}, rank={self.rank}, k={self.k}, "
                f"k_eff={self.k_eff}, draws={draws}{extra}, seconds={d.seconds:.1f})")


def _start_fit(data, rank, initial, ridge) -> LowRankResult:
    if initial is None:
        return fit_low_rank(data, rank, ridge=ridge)
    if not isinstance(initial, LowRankResult):
        raise TypeError(f"initial must be a LowRankResult, got {type(initial).__name__}")
    if initial.rank != rank or initial.theta.shape != (data.d_x, data.d_phi):
        raise ValueError(f"initial has rank {initial.rank} and Θ of shape {initial.theta.shape}; "
                         f"expected rank {rank} and ({data.d_x}, {data.d_phi})")
    return initial


def _reference_basis(reference, start, rank, data) -> RTVBasis:
    if reference is None:
        return rtv_basis(start.theta, rank)
    if isinstance(reference, LowRankResult):
        return rtv_basis(reference.theta, rank)
    if isinstance(reference, RTVBasis):
        if (reference.rank, reference.d_x, reference.d_phi) != (rank, data.d_x, data.d_phi):
            raise ValueError(f"reference has rank {reference.rank} and (d_x, d_phi) = "
                             f"({reference.d_x}, {reference.d_phi}); expected rank {rank} and "
                             f"({data.d_x}, {data.d_phi})")
        return reference
    raise TypeError(f"reference must be an RTVBasis, a LowRankResult or None, got {type(reference).__name__}")


def _rms(a) -> float:
    return float(np.sqrt(np.mean(a * a))) or 1.0


def _initvals(u0, v0, chains, jitter, rng, per_chain):
    """Start at the balanced factors plus a small relative jitter (one start, or one per chain).

    Some jitter is needed even for a single shared start: nutpie refuses a start
    where a gradient entry is exactly 0 ("bad initial gradient"), which is the
    case at the minimum-norm MLE for rows of V that no comparison reaches.
    """
    scale_u, scale_v = _rms(u0), _rms(v0)
    starts = [{D.LEFT: u0 + jitter * scale_u * rng.standard_normal(u0.shape),
               D.RIGHT: v0 + jitter * scale_v * rng.standard_normal(v0.shape)}
              for _ in range(chains if per_chain else 1)]
    return starts if per_chain else starts[0]


def _stat(stats, names):
    for name in names:
        if name in stats.data_vars:
            return np.asarray(stats[name].values)
    return None


def _fit_vi(model, vi_method, u0, v0, iterations, learning_rate, seed, progressbar):
    """ADVI from the frequentist start with a small initial spread (5 % of the factor scale) and Adam.

    PyMC's default initial spread (σ ≈ 0.7 mean-field, 1.3 full-rank) around
    factors of size ~1, with adagrad, sends η to overflow in the first steps.
    """
    start = {D.LEFT: u0, D.RIGHT: v0}
    sigma = np.concatenate([np.full(u0.size, 0.05 * _rms(u0)), np.full(v0.size, 0.05 * _rms(v0))])
    with model:
        if vi_method == "advi":
            inference = pm.ADVI(start=start, start_sigma={D.LEFT: sigma[:u0.size], D.RIGHT: sigma[u0.size:]},
                                random_seed=seed)
        else:
            inference = pm.FullRankADVI(start=start, random_seed=seed)
            group = inference.approx.groups[0]
            n = group.ddim
            if n != sigma.size:
                raise RuntimeError(f"full-rank ADVI has {n} parameters, expected {sigma.size}")
            tril = np.zeros((n, n))
            tril[np.diag_indices(n)] = np.log(np.expm1(sigma))  # inverse of softplus (rho2sigma)
            group.params_dict["L_tril"].set_value(tril[np.tril_indices(n)])
        return inference.fit(n=iterations, progressbar=progressbar,
                             obj_optimizer=pm.adam(learning_rate=learning_rate))


def _nuts_diagnostics(tree, sampler, seconds, rhat_max, ess_min) -> SamplerDiagnostics:
    stats = tree["sample_stats"]
    div = _stat(stats, ("diverging",))
    depth = _stat(stats, _DEPTH_STATS)
    maxd = _stat(stats, _MAXDEPTH_STATS)
    summary = az.summary(tree, var_names=[D.THETA_RTV], kind="diagnostics")
    whole = az.summary(tree, var_names=[D.THETA], kind="diagnostics")
    both = pd.concat([summary, whole])
    diag = SamplerDiagnostics(
        method="nuts", sampler=sampler, seconds=seconds,
        divergences=None if div is None else int(div.sum()),
        max_depth_hits=None if maxd is None else int(maxd.sum()),
        mean_tree_depth=None if depth is None else float(depth.mean()),
        max_rhat=float(np.nanmax(both["r_hat"].to_numpy(float))),
        min_ess_bulk=float(np.nanmin(both["ess_bulk"].to_numpy(float))),
        min_ess_tail=float(np.nanmin(both["ess_tail"].to_numpy(float))),
        summary=summary)
    messages = []
    if diag.divergences:
        messages.append(f"{diag.divergences} divergent transitions after tuning: raise target_accept "
                        "(e.g. 0.95), keep the start at the frequentist fit, or use more tuning steps")
    n_chains = tree["posterior"].sizes.get("chain", 1)
    if n_chains > 1 and diag.max_rhat > rhat_max:
        messages.append(f"max R-hat over Θ and θ_rtv is {diag.max_rhat:.4f} > {rhat_max}: the chains "
                        "disagree; run more tune/draws, and start at the frequentist fit (initial=)")
    if diag.min_ess_bulk < ess_min or diag.min_ess_tail < ess_min:
        messages.append(f"min ESS over Θ and θ_rtv is bulk {diag.min_ess_bulk:.0f} / tail "
                        f"{diag.min_ess_tail:.0f} < {ess_min}: draw more, or try nuts_sampler='nutpie'")
    for message in messages:
        warnings.warn(f"fit_posterior: {message}", SamplerWarning, stacklevel=3)
    return SamplerDiagnostics(**{**diag.__dict__, "messages": tuple(messages)})


def fit_posterior(data: PreferenceData, rank: int, *, method: str = "nuts", draws: int = 1000,
                  tune: int = 1000, chains: int = 4, cores: int | None = None,
                  nuts_sampler: str | None = None, target_accept: float = 0.9,
                  prior_scale: float = 1.0, scale_prior: bool = False, balance: float = 0.0,
                  initial: LowRankResult | None = None, reference=None, ridge: float = 0.0,
                  init_jitter: float = 0.01, vi_method: str = "advi", vi_iterations: int = 30000,
                  vi_learning_rate: float = 0.01, random_seed: int = 0, progressbar: bool = True,
                  rhat_max: float = 1.01, ess_min: float = 400.0,
                  model_kwargs: dict | None = None) -> Posterior:
    """Posterior of Θ = U Vᵀ under the factored model, with θ_rtv in the DataTree.

    Parameters
    ----------
    data : PreferenceData
    rank : int
        r.
    method : {"nuts", "map", "vi"}
        ``"nuts"``: ``pm.sample``; ``"map"``: ``pm.find_MAP`` (L-BFGS-B), a point
        estimate; ``"vi"``: ADVI (``vi_method``), a fast Gaussian approximation
        in (U, V) whose spread is typically too small (mean-field ignores the
        posterior correlations of U and V).
    draws, tune, chains, cores : int
        NUTS draws and tuning steps per chain, chains and parallel processes;
        for ``"vi"``, ``draws`` draws from the fitted approximation.
    nuts_sampler : {"pymc", "nutpie", "numpyro"} or None
        The NUTS implementation; None picks nutpie when it is installed (as
        PyMC 6 does) and PyMC's own otherwise. ``"numpyro"`` runs on JAX's
        default device (a GPU where JAX sees one), its chains vectorized when
        there are fewer devices than chains.
    target_accept : float
        NUTS target acceptance.
    prior_scale, scale_prior, balance : see :func:`~bayes_loco.bayes.build_model`.
    initial : LowRankResult, optional
        The frequentist low-rank fit to start from (fitted here if not given,
        with ``ridge``). Every chain, the MAP search and ADVI start at its
        balanced factors U₀ = P S^{1/2}, V₀ = Q S^{1/2}, never at the origin.
    reference : RTVBasis or LowRankResult, optional
        The fixed fit whose RTV coordinates define θ_rtv; the start fit by default.
    ridge : float
        λ of the frequentist start when it is fitted here (a small ridge helps
        when rarely compared actions are separable).
    init_jitter : float
        Relative jitter (times the root-mean-square factor entry) of the starts:
        one per chain for PyMC's sampler, one shared start for nutpie and
        numpyro (which take a single initial point).
    vi_method : {"advi", "fullrank_advi"}
    vi_iterations : int
    vi_learning_rate : float
        Adam's learning rate for ADVI.
    random_seed : int
        Seeds the sampler, the optimiser and the per-chain jitter.
    progressbar : bool
        Passed to PyMC.
    rhat_max, ess_min : float
        A :class:`~bayes_loco.SamplerWarning` is issued when R-hat of some entry
        of Θ or θ_rtv exceeds ``rhat_max``, its bulk or tail ESS is below
        ``ess_min``, or any transition diverged.
    model_kwargs : dict, optional
        Further arguments of :func:`~bayes_loco.bayes.build_model` (e.g.
        ``store_margins``, ``context_names``).

    Returns
    -------
    Posterior
    """
    if not isinstance(data, PreferenceData):
        raise TypeError(f"data must be a PreferenceData, got {type(data).__name__}")
    rank = check_rank(rank, data.d_x, data.d_phi)
    check_option(method, "method", METHODS)
    draws = check_int(draws, "draws", 1)
    tune = check_int(tune, "tune", 0)
    chains = check_int(chains, "chains", 1)
    if cores is not None:
        cores = check_int(cores, "cores", 1)
    if nuts_sampler is None:
        nuts_sampler = "nutpie" if "nutpie" in available_samplers() else "pymc"
    check_option(nuts_sampler, "nuts_sampler", NUTS_SAMPLERS)
    if method == "nuts" and nuts_sampler not in available_samplers():
        raise ValueError(f"nuts_sampler={nuts_sampler!r} is not installed; available: "
                         f"{', '.join(available_samplers())}")
    target_accept = check_real(target_accept, "target_accept", 0.0, 1.0, low_open=True, high_open=True)
    init_jitter = check_real(init_jitter, "init_jitter", 0.0)
    check_option(vi_method, "vi_method", VI_METHODS)
    vi_iterations = check_int(vi_iterations, "vi_iterations", 1)
    vi_learning_rate = check_real(vi_learning_rate, "vi_learning_rate", 0.0, low_open=True)
    random_seed = check_int(random_seed, "random_seed", 0)
    rhat_max = check_real(rhat_max, "rhat_max", 1.0)
    ess_min = check_real(ess_min, "ess_min", 0.0)
    if not isinstance(progressbar, bool):
        raise TypeError(f"progressbar must be a bool, got {progressbar!r}")

    start = _start_fit(data, rank, initial, ridge)
    basis = _reference_basis(reference, start, rank, data)
    model = build_model(data, rank, prior_scale=prior_scale, scale_prior=scale_prior, balance=balance,
                        **(model_kwargs or {}))
    u0, v0 = balanced_factors(start.theta, rank)
    rng = np.random.default_rng(random_seed)
    settings = dict(rank=rank, method=method, prior_scale=prior_scale, scale_prior=scale_prior,
                    balance=balance, random_seed=random_seed)

    t0 = time.perf_counter()
    if method == "nuts":
        per_chain = nuts_sampler == "pymc"
        initvals = _initvals(u0, v0, chains, init_jitter, rng, per_chain)
        kwargs = dict(draws=draws, tune=tune, chains=chains, cores=cores, random_seed=random_seed,
                      progressbar=progressbar, nuts_sampler=nuts_sampler, initvals=initvals,
                      target_accept=target_accept, compute_convergence_checks=False, model=model)
        if nuts_sampler == "pymc":
            kwargs["init"] = "adapt_diag"  # no jitter on top of ours
        elif nuts_sampler == "nutpie":
            kwargs["compile_kwargs"] = {"jitter_rvs": set()}
        else:
            kwargs["nuts"] = {"jitter": False, "chain_method": _jax_chain_method(chains)}
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning)
            tree = pm.sample(**kwargs)
        sampler = nuts_sampler
        settings |= dict(draws=draws, tune=tune, chains=chains, nuts_sampler=nuts_sampler,
                         target_accept=target_accept)
    elif method == "map":
        tree = pm.find_MAP(initvals={D.LEFT: u0, D.RIGHT: v0}, jitter=False, return_inferencedata=True,
                           progressbar=progressbar, random_seed=random_seed, model=model)
        sampler = "L-BFGS-B"
    else:
        with model:
            approx = _fit_vi(model, vi_method, u0, v0, vi_iterations, vi_learning_rate, random_seed,
                             progressbar)
            tree = approx.sample(draws, random_seed=random_seed + 1)
        sampler = vi_method
        settings |= dict(draws=draws, vi_method=vi_method, vi_iterations=vi_iterations,
                         final_loss=float(np.mean(approx.hist[-max(1, vi_iterations // 100):])))
    seconds = time.perf_counter() - t0

    add_theta_rtv(tree, basis)
    from .. import __version__

    tree.attrs.update({"bayes_loco_version": __version__, "model": "factored contextual BTL",
                       **{k: str(v) for k, v in settings.items()}})
    if method == "nuts":
        diagnostics = _nuts_diagnostics(tree, sampler, seconds, rhat_max, ess_min)
    else:
        diagnostics = SamplerDiagnostics(method=method, sampler=sampler, seconds=seconds)
    directions = identified_directions(basis, data)
    return Posterior(tree, model, basis, start, directions, diagnostics, method, data, settings)
