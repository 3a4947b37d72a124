"""Posterior fits of the factored model: MAP, NUTS and ADVI, all started at the frequentist fit.

The start matters (docs/design.md, conventions 5 and 6): U = V = 0 is a saddle of
the factored posterior, and chains started elsewhere than near the MLE's rank-r
SVD did not agree at large N. Every method here starts from the balanced factors
of :func:`bayes_loco.fit_low_rank` and diagnoses only identified quantities (Θ
and θ_rtv in the RTV coordinates of a fixed basis).

The settings of :func:`fit_posterior` come in three groups, each a frozen
dataclass that also accepts a dict of its fields: :class:`Prior`,
:class:`NUTS` and :class:`VI`.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import arviz as az
import numpy as np
import pandas as pd
import pymc as pm
import xarray as xr

from .._validation import check_int, check_option, check_rank, check_real
from ..coordinates import RTVBasis, check_coordinates, design, identified_directions, rtv_basis
from ..data import PreferenceData, checks_data
from ..exceptions import ConvergenceWarning, SamplerWarning
from ..frequentist.fgd import LowRankResult, fit_low_rank
from ..model import fisher_information, margins
from ..results import (
    Diagnostics,
    FitStatus,
    InRTVCoordinates,
    Summary,
    data_header,
    diagnostics_header,
    penalty_ellipsoid,
    unidentified_note,
)
from ..sets import EllipsoidSet
from . import dims as D
from .credible import KINDS, credible_set
from .model import balanced_factors, build_model
from .reduced import add_theta_rtv, draws_moments, stacked_draws

METHODS = ("nuts", "map", "vi")
NUTS_SAMPLERS = ("pymc", "nutpie", "numpyro")
VI_METHODS = ("advi", "fullrank_advi")
# Sampler-stat names differ between the NUTS implementations (docs/design.md, 'Samplers').
_DEPTH_STATS = ("tree_depth", "depth")
_MAXDEPTH_STATS = ("reached_max_treedepth", "maxdepth_reached")
# A coordinate e_i of θ_rtv is identified when ‖e_i − P Pᵀ e_i‖ is below this (P: the identified directions).
IDENTIFIED_TOL = 1e-6
SUMMARY_COLUMNS = ("estimate", "std_err", "lower", "upper", "ess_bulk", "ess_tail", "r_hat")


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


# ------------------------------------------------------------------------------------- settings


def _set(obj, name, value) -> None:
    object.__setattr__(obj, name, value)


@dataclass(frozen=True)
class Prior:
    """The prior of :func:`~bayes_loco.bayes.build_model` (see there for what each setting does).

    Attributes
    ----------
    scale : float
        s > 0: the prior standard deviation of the factor entries U_ik, V_jk,
        or the scale of their HalfNormal hyper-prior.
    hyper : bool
        HalfNormal(``scale``) hyper-priors on the factor scales s_U, s_V.
    balance : float
        c ≥ 0 of the balancing potential −(c/8)‖UᵀU − VᵀV‖²_F (0: free factors).
    """

    scale: float = 1.0
    hyper: bool = False
    balance: float = 0.0

    def __post_init__(self):
        _set(self, "scale", check_real(self.scale, "prior.scale", 0.0, low_open=True))
        if not isinstance(self.hyper, bool):
            raise TypeError(f"prior.hyper must be a bool, got {self.hyper!r}")
        _set(self, "balance", check_real(self.balance, "prior.balance", 0.0))


@dataclass(frozen=True)
class NUTS:
    """Settings of NUTS (``method="nuts"``).

    Attributes
    ----------
    draws, tune : int
        Draws kept and tuning steps, per chain.
    chains : int
    cores : int or None
        Parallel processes (PyMC's sampler); None lets PyMC choose.
    sampler : {"pymc", "nutpie", "numpyro"} or None
        The NUTS implementation; None picks nutpie when it is installed (as
        PyMC 6 does) and PyMC's own otherwise (the fit records the one used).
        ``"numpyro"`` runs on JAX's default device (a GPU where JAX sees one),
        its chains vectorized when there are fewer devices than chains.
    target_accept : float
        Target acceptance in (0, 1).
    init_jitter : float
        Relative jitter (times the root-mean-square factor entry) of the starts:
        one per chain for PyMC's sampler, one shared start for nutpie and
        numpyro (which take a single initial point).
    rhat_max, ess_min : float
        A :class:`~bayes_loco.SamplerWarning` is issued when R-hat of some entry
        of Θ or θ_rtv exceeds ``rhat_max``, its bulk or tail ESS is below
        ``ess_min``, or any transition diverged.
    """

    draws: int = 1000
    tune: int = 1000
    chains: int = 4
    cores: int | None = None
    sampler: str | None = None
    target_accept: float = 0.9
    init_jitter: float = 0.01
    rhat_max: float = 1.01
    ess_min: float = 400.0

    def __post_init__(self):
        _set(self, "draws", check_int(self.draws, "nuts.draws", 1))
        _set(self, "tune", check_int(self.tune, "nuts.tune", 0))
        _set(self, "chains", check_int(self.chains, "nuts.chains", 1))
        if self.cores is not None:
            _set(self, "cores", check_int(self.cores, "nuts.cores", 1))
        if self.sampler is not None:
            check_option(self.sampler, "nuts.sampler", NUTS_SAMPLERS)
        _set(self, "target_accept", check_real(self.target_accept, "nuts.target_accept", 0.0, 1.0,
                                               low_open=True, high_open=True))
        _set(self, "init_jitter", check_real(self.init_jitter, "nuts.init_jitter", 0.0))
        _set(self, "rhat_max", check_real(self.rhat_max, "nuts.rhat_max", 1.0))
        _set(self, "ess_min", check_real(self.ess_min, "nuts.ess_min", 0.0))


@dataclass(frozen=True)
class VI:
    """Settings of variational inference (``method="vi"``).

    Attributes
    ----------
    method : {"advi", "fullrank_advi"}
        Mean-field or full-rank ADVI.
    iterations : int
        Optimisation steps.
    learning_rate : float
        Adam's learning rate.
    draws : int
        Draws from the fitted approximation.
    """

    method: str = "advi"
    iterations: int = 30000
    learning_rate: float = 0.01
    draws: int = 1000

    def __post_init__(self):
        check_option(self.method, "vi.method", VI_METHODS)
        _set(self, "iterations", check_int(self.iterations, "vi.iterations", 1))
        _set(self, "learning_rate", check_real(self.learning_rate, "vi.learning_rate", 0.0, low_open=True))
        _set(self, "draws", check_int(self.draws, "vi.draws", 1))


def settings_group(value, cls, name: str):
    """``value`` as a ``cls`` settings group: an instance, a dict of its fields, or None (the defaults).

    Raises one ValueError naming the group, the unknown keys and the known ones,
    and ``cls``'s own errors (``"nuts.draws must be >= 1"``) for bad values.
    """
    if value is None:
        return cls()
    if isinstance(value, cls):
        return value
    if isinstance(value, Mapping):
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = [key for key in value if key not in known]
        if unknown:
            raise ValueError(f"{name} has no setting {', '.join(map(repr, unknown))}; the {name} settings "
                             f"are {', '.join(known)}")
        return cls(**value)
    raise TypeError(f"{name} must be a {cls.__name__}, a dict of its settings or None, "
                    f"got {type(value).__name__}")


# ------------------------------------------------------------------------------------ posterior


@dataclass(frozen=True, eq=False)
class Posterior(InRTVCoordinates):
    """A posterior fit of the factored model and its reduced coordinates.

    It follows the :class:`~bayes_loco.results.Fit` protocol in the RTV
    coordinates of ``basis``: ``theta`` is the posterior mean Θ̄, ``estimate``
    the posterior mean of θ_rtv, and ``calibrated_set`` gives the credible
    ellipsoid, its sandwich, the hull of draws or the pointwise quantile.

    Every field is plain data (picklable, and what :func:`bayes_loco.save`
    stores); the PyMC model is rebuilt on demand (:attr:`model`).

    Attributes
    ----------
    tree : xarray.DataTree
        ArviZ DataTree. Its ``posterior`` holds ``U`` (context × rank), ``V``
        (feature × rank), ``theta`` = Θ (context × feature) and ``theta_rtv`` =
        θ_rtv (rtv_coord); diagnose the last two, not U and V. NUTS fits also
        carry ``sample_stats``; every fit ``observed_data``; MAP fits
        ``optimizer_result``. Its ``attrs`` hold the package version, the rank and
        method (typed) and the whole ``settings`` as JSON (``"settings"``), all of
        which netCDF can store, so ``tree.to_netcdf`` works as ArviZ users expect.
    basis : RTVBasis
        Û, V̂ and r of the fit whose RTV coordinates define θ_rtv (``basis=`` of :func:`fit_posterior`).
    start : LowRankResult
        The frequentist low-rank fit the sampler/optimiser started from.
    directions : ndarray, shape (k, k_eff)
        Orthonormal basis of the θ_rtv directions the data identify (range of
        the reduced design's Gram matrix); credible sets are restricted to them.
    diagnostics : Diagnostics
        ``method`` is ``"nuts-<sampler>"``, ``"map"`` or ``"vi-<method>"``.
    method : {"nuts", "map", "vi"}
    data : PreferenceData
    settings : dict
        The fit's settings as JSON-able values: ``rank``, ``method``,
        ``ridge``, ``random_seed``, the group ``prior`` and, for NUTS and VI,
        the group ``nuts`` (with the sampler that ran) or ``vi``.
    """

    tree: xr.DataTree
    basis: RTVBasis
    start: LowRankResult
    directions: np.ndarray
    diagnostics: Diagnostics
    method: str
    data: PreferenceData
    settings: dict

    calibrated_kinds = KINDS

    def __post_init__(self):
        for name, cls in (("tree", xr.DataTree), ("basis", RTVBasis), ("start", LowRankResult),
                          ("diagnostics", Diagnostics), ("data", PreferenceData), ("settings", Mapping)):
            if not isinstance(getattr(self, name), cls):
                raise TypeError(f"Posterior.{name} must be a {cls.__name__}, got "
                                f"{type(getattr(self, name)).__name__}")
        check_option(self.method, "method", METHODS)
        check_coordinates(self.basis, self.data.d_x, self.data.d_phi, "Posterior.basis")
        directions = np.asarray(self.directions)
        k = self.basis.dim
        if directions.ndim != 2 or directions.shape[0] != k or directions.shape[1] > k:
            raise ValueError(f"Posterior.directions must have shape ({k}, k_eff), "
                             f"got {directions.shape}")

    def __getstate__(self) -> dict:
        """The fields only: not the cached PyMC model, which does not pickle, nor the cached draws.

        Each is rebuilt on first use (the draws from ``tree``, the model from
        ``data``, ``rank`` and ``settings["prior"]``).
        """
        state = self.__dict__.copy()
        for cached in _CACHED:
            state.pop(cached, None)
        return state

    @cached_property
    def model(self) -> pm.Model:
        """The model of :func:`~bayes_loco.bayes.build_model` on ``data``, ``rank`` and the prior settings.

        The fitted model itself after :func:`fit_posterior`; rebuilt after
        unpickling or loading. Reusable with ``pm.set_data``.
        """
        return build_model(self.data, self.rank, prior=self.settings.get("prior"))

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
    def theta(self) -> np.ndarray:
        """Posterior mean Θ̄ (d_x × d_φ); for MAP, the MAP estimate."""
        return self.theta_draws.mean(axis=0)

    @property
    def estimate(self) -> np.ndarray:
        """Posterior mean of θ_rtv (k,); for MAP, the MAP estimate's θ_rtv."""
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

    def penalty_set(self, c2: float = 5.0) -> EllipsoidSet:
        """The paper's tuned penalty around the posterior mean: ‖θ − θ̄_rtv‖_W ≤ C₂·sqrt(k/N), W = ZᵀZ.

        Z is the N × k design of the comparisons in RTV coordinates (W is the
        Gram matrix Σ_t z_t z_tᵀ); the set has no level (docs/design.md,
        convention 2).
        """
        z = design(self.basis, self.data)
        return penalty_ellipsoid(self.estimate, z.T @ z, self.data.n, self.basis, c2)

    def calibrated_set(self, level: float = 0.9, kind: str | None = "credible", *, identified: bool = True):
        """A ``kind`` set for θ_rtv at ``level`` that :func:`bayes_loco.pessimistic_policy` accepts.

        The set's ``.kind`` is ``kind``.

        Parameters
        ----------
        level : float
            Level in (0, 1).
        kind : {"credible", "sandwich", "draws", "quantile"}
            ``"credible"`` (default; None means it too): the Gaussian credible
            ellipsoid around the posterior mean with W = inverse posterior
            covariance of the identified directions and R² = χ²_{k_eff}(level)
            (an EllipsoidSet; both objectives). ``"sandwich"``: the same
            ellipsoid with the sandwich shape Σ F Σ, F the Fisher information
            at the posterior mean Θ̄ (:meth:`information`) — a confidence set
            for θ_rtv centred at θ̄; near a low-rank Θ* the posterior is wider
            than the error of its mean and the credible set over-covers
            (docs/results.md measures both). ``"draws"``: the convex hull of
            the ``level`` fraction of draws with the smallest Mahalanobis
            distance (a DrawsSet; both objectives). ``"quantile"``: the
            pointwise (1 − level) posterior quantile of θᵀz (a QuantileSet;
            relaxed objective only). See :mod:`bayes_loco.bayes.credible` for
            what each guarantees.
        identified : bool
            Restrict the ellipsoids and the Mahalanobis distance to the
            directions the data identify (default; see
            :mod:`bayes_loco.bayes.credible`); False uses all k directions.

        Raises
        ------
        ValueError
            An unknown kind, a bad level, or a MAP fit (no draws).
        """
        kind = "credible" if kind is None else kind
        check_option(kind, "kind", self.calibrated_kinds)
        self._need_draws("calibrated_set")
        information = self.information() if kind == "sandwich" else None
        return credible_set(self.rtv_draws, self.basis, level, kind,
                            directions=self.directions if identified else None, information=information)

    def information(self) -> np.ndarray:
        """Fisher information of θ_rtv at the posterior mean, Σ_t p̄_t(1 − p̄_t) z_t z_tᵀ (k × k).

        p̄_t uses the posterior mean Θ̄ itself, x_tᵀ Θ̄ Δφ_t, not its reduction
        (Θ̄ has a component outside the reduced subspace).
        """
        data = self.data
        eta = margins(self.theta, data.contexts, data.differences)
        return fisher_information(design(self.basis, data), eta)

    def _identified_coordinates(self) -> np.ndarray:
        """Whether each coordinate e_i of θ_rtv lies in the span of ``directions`` (boolean, (k,))."""
        p = self.directions
        return np.linalg.norm(np.eye(self.k) - p @ p.T, axis=0) <= IDENTIFIED_TOL

    def _summary_table(self, level: float) -> pd.DataFrame:
        index = pd.Index(self.basis.labels(), name="coordinate")
        table = pd.DataFrame(np.nan, index=index, columns=list(SUMMARY_COLUMNS))
        table["estimate"] = self.estimate
        if self.method == "map":
            return table
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # R-hat of one chain (VI), few draws: NaN, reported as such
            stats = az.summary(self.tree, var_names=[D.THETA_RTV], ci_prob=level, ci_kind="eti",
                               round_to="none")
        if len(stats) != self.k:
            raise RuntimeError(f"az.summary gave {len(stats)} rows for θ_rtv, expected {self.k}")
        table["std_err"] = stats["sd"].to_numpy(float)
        for column, suffix in (("lower", "_lb"), ("upper", "_ub")):
            table[column] = stats[_interval_column(stats, suffix)].to_numpy(float)
        for column in ("ess_bulk", "ess_tail", "r_hat"):
            table[column] = stats[column].to_numpy(float)
        return table

    def _title_and_facts(self) -> tuple[str, dict]:
        d, post = self.diagnostics, self.tree["posterior"]
        if self.method == "nuts":
            return (f"Posterior (NUTS, {d.method.removeprefix('nuts-')})",
                    {"chains": post.sizes.get("chain", 1), "draws": post.sizes.get("draw", 1),
                     "divergences": d.divergences, "max R-hat": d.max_rhat, "min ESS bulk": d.min_ess_bulk})
        if self.method == "vi":
            return (f"Posterior (VI, {d.method.removeprefix('vi-')})",
                    {"draws": self.rtv_draws.shape[0], "final loss": self.tree.attrs.get("final_loss")})
        return "Posterior (MAP, L-BFGS-B)", {}

    def summary(self, level: float = 0.95) -> Summary:
        """Posterior mean, sd and equal-tailed ``level`` interval of each identified coordinate of θ_rtv.

        The table has one row per coordinate e_i of θ_rtv (labels of
        ``basis.labels()``) that the data identify (e_i in the span of
        ``directions``), with ArviZ's ESS and R-hat; the header the data's
        dimensions, the fit's diagnostics and the sampler's facts. A MAP fit
        has estimates only (NaN elsewhere) and a note.
        """
        level = check_real(level, "level", 0.0, 1.0, low_open=True, high_open=True)
        identified = self._identified_coordinates()
        table = self._summary_table(level)[identified]
        title, facts = self._title_and_facts()
        header = (data_header(self.data, self.basis, self.rank, self.k_eff)
                  | diagnostics_header(self.diagnostics) | facts)
        notes = list(self.diagnostics.warnings)
        if self.method == "map":
            notes.append("MAP is a point estimate: no intervals.")
        elif self.method == "vi":
            notes.append("VI is a Gaussian approximation in (U, V): its intervals are typically too narrow.")
        notes += unidentified_note(int((~identified).sum()), self.k)
        return Summary(title, header, table, tuple(notes))

    def __repr__(self) -> str:
        d = self.diagnostics
        draws = self.rtv_draws.shape[0]
        extra = ""
        if self.method == "nuts":
            extra = (f", divergences={d.divergences}, max R-hat={d.max_rhat:.4f}, "
                     f"min ESS bulk={d.min_ess_bulk:.0f}")
        return (f"Posterior(method={d.method!r}, rank={self.rank}, k={self.k}, k_eff={self.k_eff}, "
                f"draws={draws}{extra}, converged={d.converged}, seconds={d.seconds:.1f})")


# What Posterior computes on first use and does not pickle.
_CACHED = ("model", "theta_draws", "rtv_draws")


def _interval_column(stats: pd.DataFrame, suffix: str) -> str:
    """The name of az.summary's interval bound column (``eti95_lb`` at level 0.95)."""
    found = [c for c in stats.columns if c.startswith("eti") and c.endswith(suffix)]
    if len(found) != 1:
        raise RuntimeError(f"az.summary has no single equal-tailed interval column ending in {suffix!r}: "
                           f"{list(stats.columns)}")
    return found[0]


# ------------------------------------------------------------------------------ start and basis


def _start_fit(data, rank, start, ridge) -> LowRankResult:
    if start is None:
        return fit_low_rank(data, rank, ridge=ridge)
    if not isinstance(start, LowRankResult):
        raise TypeError(f"start must be a LowRankResult, got {type(start).__name__}")
    if start.rank != rank or start.theta.shape != (data.d_x, data.d_phi):
        raise ValueError(f"start has rank {start.rank} and Θ of shape {start.theta.shape}; "
                         f"expected rank {rank} and ({data.d_x}, {data.d_phi})")
    return start


def _resolve_basis(basis, start, rank, data) -> RTVBasis:
    if basis is None:
        return rtv_basis(start.theta, rank)
    if isinstance(basis, LowRankResult):
        return rtv_basis(basis.theta, rank)
    if isinstance(basis, RTVBasis):
        if (basis.rank, basis.d_x, basis.d_phi) != (rank, data.d_x, data.d_phi):
            raise ValueError(f"basis has rank {basis.rank} and (d_x, d_phi) = ({basis.d_x}, {basis.d_phi}); "
                             f"expected rank {rank} and ({data.d_x}, {data.d_phi})")
        return basis
    raise TypeError(f"basis must be an RTVBasis, a LowRankResult or None, got {type(basis).__name__}")


def _resolve_sampler(nuts: NUTS) -> NUTS:
    """``nuts`` with the sampler that will run: nutpie when installed and none was named, else PyMC's."""
    sampler = nuts.sampler or ("nutpie" if "nutpie" in available_samplers() else "pymc")
    if sampler not in available_samplers():
        raise ValueError(f"nuts.sampler={sampler!r} is not installed; available: "
                         f"{', '.join(available_samplers())}")
    return dataclasses.replace(nuts, sampler=sampler)


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


# -------------------------------------------------------------------------------------- methods


def _sample_nuts(model, nuts: NUTS, u0, v0, seed: int, progressbar: bool) -> xr.DataTree:
    """``pm.sample`` from the jittered balanced factors, with no jitter of the sampler's own on top."""
    rng = np.random.default_rng(seed)
    initvals = _initvals(u0, v0, nuts.chains, nuts.init_jitter, rng, per_chain=nuts.sampler == "pymc")
    kwargs = dict(draws=nuts.draws, tune=nuts.tune, chains=nuts.chains, cores=nuts.cores, random_seed=seed,
                  progressbar=progressbar, nuts_sampler=nuts.sampler, initvals=initvals,
                  target_accept=nuts.target_accept, compute_convergence_checks=False, model=model)
    if nuts.sampler == "pymc":
        kwargs["init"] = "adapt_diag"  # no jitter on top of ours
    elif nuts.sampler == "nutpie":
        kwargs["compile_kwargs"] = {"jitter_rvs": set()}
    else:
        kwargs["nuts"] = {"jitter": False, "chain_method": _jax_chain_method(nuts.chains)}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning)
        return pm.sample(**kwargs)


def _find_map(model, u0, v0, seed: int, progressbar: bool) -> xr.DataTree:
    """``pm.find_MAP`` (L-BFGS-B) from the balanced factors; the DataTree keeps its ``optimizer_result``."""
    return pm.find_MAP(initvals={D.LEFT: u0, D.RIGHT: v0}, jitter=False, return_inferencedata=True,
                       progressbar=progressbar, random_seed=seed, model=model)


def _vi_inference(model, vi: VI, u0, v0, seed: int):
    """ADVI from the frequentist start with a small initial spread (5 % of the factor scale).

    PyMC's default initial spread (σ ≈ 0.7 mean-field, 1.3 full-rank) around
    factors of size ~1, with adagrad, sends η to overflow in the first steps.
    """
    start = {D.LEFT: u0, D.RIGHT: v0}
    sigma = np.concatenate([np.full(u0.size, 0.05 * _rms(u0)), np.full(v0.size, 0.05 * _rms(v0))])
    with model:
        if vi.method == "advi":
            return pm.ADVI(start=start, start_sigma={D.LEFT: sigma[:u0.size], D.RIGHT: sigma[u0.size:]},
                           random_seed=seed)
        inference = pm.FullRankADVI(start=start, random_seed=seed)
    group = inference.approx.groups[0]
    n = group.ddim
    if n != sigma.size:
        raise RuntimeError(f"full-rank ADVI has {n} parameters, expected {sigma.size}")
    tril = np.zeros((n, n))
    tril[np.diag_indices(n)] = np.log(np.expm1(sigma))  # inverse of softplus (rho2sigma)
    group.params_dict["L_tril"].set_value(tril[np.tril_indices(n)])
    return inference


def _fit_vi(model, vi: VI, u0, v0, seed: int, progressbar: bool) -> xr.DataTree:
    """Fit ADVI with Adam and draw from it; the tree's attrs get the mean loss of the last 1 % of steps."""
    inference = _vi_inference(model, vi, u0, v0, seed)
    with model:
        approx = inference.fit(n=vi.iterations, progressbar=progressbar,
                               obj_optimizer=pm.adam(learning_rate=vi.learning_rate))
        tree = approx.sample(vi.draws, random_seed=seed + 1)
    tree.attrs["final_loss"] = float(np.mean(approx.hist[-max(1, vi.iterations // 100):]))
    return tree


# ---------------------------------------------------------------------------------- diagnostics


def _stat(stats, names):
    for name in names:
        if name in stats.data_vars:
            return np.asarray(stats[name].values)
    return None


def _nuts_diagnostics(tree, nuts: NUTS, seconds: float) -> Diagnostics:
    """Divergences, tree depth, and R-hat/ESS over every entry of Θ and θ_rtv; a message for each problem."""
    stats = tree["sample_stats"]
    div, depth, maxd = (_stat(stats, names) for names in (("diverging",), _DEPTH_STATS, _MAXDEPTH_STATS))
    both = pd.concat([az.summary(tree, var_names=[var], kind="diagnostics")
                      for var in (D.THETA_RTV, D.THETA)])
    divergences = None if div is None else int(div.sum())
    max_rhat = float(np.nanmax(both["r_hat"].to_numpy(float)))
    min_bulk = float(np.nanmin(both["ess_bulk"].to_numpy(float)))
    min_tail = float(np.nanmin(both["ess_tail"].to_numpy(float)))
    messages = []
    if divergences:
        messages.append(f"{divergences} divergent transitions after tuning: raise nuts.target_accept "
                        "(e.g. 0.95), keep the start at the frequentist fit, or use more tuning steps")
    chains = tree["posterior"].sizes.get("chain", 1)
    if chains > 1 and max_rhat > nuts.rhat_max:
        messages.append(f"max R-hat over Θ and θ_rtv is {max_rhat:.4f} > {nuts.rhat_max}: the chains "
                        "disagree; run more tune/draws, and start at the frequentist fit (start=)")
    if min_bulk < nuts.ess_min or min_tail < nuts.ess_min:
        messages.append(f"min ESS over Θ and θ_rtv is bulk {min_bulk:.0f} / tail {min_tail:.0f} < "
                        f"{nuts.ess_min}: draw more, or try nuts={{'sampler': 'nutpie'}}")
    converged = not messages
    message = (f"{chains} chains × {nuts.draws} draws after {nuts.tune} tuning steps: {divergences} "
               f"divergences, max R-hat {max_rhat:.4f}, min ESS bulk {min_bulk:.0f} / tail {min_tail:.0f}")
    return Diagnostics(
        f"nuts-{nuts.sampler}", converged, nuts.draws,
        FitStatus.CONVERGED if converged else FitStatus.SAMPLER_WARNINGS, message, tuple(messages), seconds,
        divergences=divergences, max_depth_hits=None if maxd is None else int(maxd.sum()),
        mean_tree_depth=None if depth is None else float(depth.mean()),
        max_rhat=max_rhat, min_ess_bulk=min_bulk, min_ess_tail=min_tail)


def _map_diagnostics(tree, seconds: float) -> Diagnostics:
    """The optimiser's own account, from find_MAP's ``optimizer_result`` group."""
    if "optimizer_result" not in tree.children:
        return Diagnostics("map", True, None, FitStatus.CONVERGED, "find_MAP gave no optimizer_result",
                           seconds=seconds)
    result = tree["optimizer_result"]
    success = bool(result["success"].values) if "success" in result.data_vars else True
    n_iter = int(result["nit"].values) if "nit" in result.data_vars else None
    message = str(result["message"].values) if "message" in result.data_vars else ""
    messages = () if success else (
        f"the MAP search (L-BFGS-B) stopped before converging after {n_iter} iterations: {message}",)
    return Diagnostics("map", success, n_iter, FitStatus.CONVERGED if success else FitStatus.NOT_CONVERGED,
                       message, messages, seconds)


def _diagnose(tree, method: str, nuts: NUTS, vi: VI, seconds: float) -> Diagnostics:
    if method == "nuts":
        return _nuts_diagnostics(tree, nuts, seconds)
    if method == "map":
        return _map_diagnostics(tree, seconds)
    message = f"{vi.iterations} iterations of {vi.method}, final loss {tree.attrs['final_loss']:.6g}"
    return Diagnostics(f"vi-{vi.method}", True, vi.draws, FitStatus.CONVERGED, message, seconds=seconds)


# ---------------------------------------------------------------------------------------- entry


def _tree_attrs(settings: dict, version: str) -> dict:
    """Attrs for the DataTree: typed scalars netCDF can hold, and the whole settings as JSON.

    The settings hold bools, None and nested groups, which netCDF attributes cannot;
    as one JSON string they survive ``tree.to_netcdf`` and ``json.loads`` restores them typed.
    """
    return {"bayes_loco_version": version, "model": "factored contextual BTL", "rank": settings["rank"],
            "method": settings["method"], "random_seed": settings["random_seed"],
            "settings": json.dumps(settings)}


@checks_data
def fit_posterior(data: PreferenceData, rank: int, *, method: str = "nuts", prior: Prior | dict | None = None,
                  nuts: NUTS | dict | None = None, vi: VI | dict | None = None,
                  start: LowRankResult | None = None, basis: RTVBasis | LowRankResult | None = None,
                  ridge: float = 0.0, random_seed: int = 0, progressbar: bool = True) -> Posterior:
    """Posterior of Θ = U Vᵀ under the factored model, with θ_rtv in the DataTree.

    Parameters
    ----------
    data : PreferenceData
    rank : int
        r.
    method : {"nuts", "map", "vi"}
        ``"nuts"``: ``pm.sample``; ``"map"``: ``pm.find_MAP`` (L-BFGS-B), a point
        estimate; ``"vi"``: ADVI, a fast Gaussian approximation in (U, V) whose
        spread is typically too small (mean-field ignores the posterior
        correlations of U and V).
    prior, nuts, vi : Prior, NUTS, VI, a dict of their fields, or None
        The settings groups (None: the defaults): the prior of
        :func:`~bayes_loco.bayes.build_model`, and the settings of NUTS and
        VI (each used by its method only), e.g. ``nuts={"draws": 500,
        "chains": 4, "sampler": "numpyro"}``.
    start : LowRankResult, optional
        The frequentist low-rank fit to start from (fitted here if not given,
        with ``ridge``). Every chain, the MAP search and ADVI start at its
        balanced factors U₀ = P S^{1/2}, V₀ = Q S^{1/2}, never at the origin.
    basis : RTVBasis or LowRankResult, optional
        The RTV coordinates of θ_rtv (a LowRankResult gives its own); the
        start's by default.
    ridge : float
        λ of the frequentist start when it is fitted here (a small ridge helps
        when rarely compared actions are separable).
    random_seed : int
        Seeds the sampler, the optimiser and the per-chain jitter.
    progressbar : bool
        Passed to PyMC.

    Returns
    -------
    Posterior
        Its ``settings`` (and, as JSON, its tree's ``attrs["settings"]``) record
        the settings, with the NUTS sampler that ran.

    Warns
    -----
    SamplerWarning
        NUTS diverged or mixed poorly (see :class:`NUTS`); ConvergenceWarning:
        the MAP search did not converge.
    """
    rank = check_rank(rank, data.d_x, data.d_phi)
    check_option(method, "method", METHODS)
    prior = settings_group(prior, Prior, "prior")
    nuts = settings_group(nuts, NUTS, "nuts")
    vi = settings_group(vi, VI, "vi")
    ridge = check_real(ridge, "ridge", 0.0)
    random_seed = check_int(random_seed, "random_seed", 0)
    if not isinstance(progressbar, bool):
        raise TypeError(f"progressbar must be a bool, got {progressbar!r}")
    if method == "nuts":
        nuts = _resolve_sampler(nuts)
    start = _start_fit(data, rank, start, ridge)
    basis = _resolve_basis(basis, start, rank, data)
    settings = {"rank": rank, "method": method, "prior": dataclasses.asdict(prior), "ridge": ridge,
                "random_seed": random_seed}
    if method != "map":
        settings[method] = dataclasses.asdict(nuts if method == "nuts" else vi)

    model = build_model(data, rank, prior=prior)
    u0, v0 = balanced_factors(start.theta, rank)
    t0 = time.perf_counter()
    if method == "nuts":
        tree = _sample_nuts(model, nuts, u0, v0, random_seed, progressbar)
    elif method == "map":
        tree = _find_map(model, u0, v0, random_seed, progressbar)
    else:
        tree = _fit_vi(model, vi, u0, v0, random_seed, progressbar)
    seconds = time.perf_counter() - t0

    from .. import __version__

    add_theta_rtv(tree, basis)
    tree.attrs.update(_tree_attrs(settings, __version__))
    diagnostics = _diagnose(tree, method, nuts, vi, seconds)
    category = ConvergenceWarning if method == "map" else SamplerWarning
    for message in diagnostics.warnings:
        warnings.warn(f"fit_posterior: {message}", category, stacklevel=3)
    directions = identified_directions(basis, data)
    post = Posterior(tree, basis, start, directions, diagnostics, method, data, settings)
    post.__dict__["model"] = model  # the fitted model itself fills the cache of Posterior.model
    return post
