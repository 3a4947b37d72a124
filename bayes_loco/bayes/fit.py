"""Posterior fits of the factored model: MAP, NUTS and ADVI, all started at the frequentist fit.

The start matters (docs/design.md, conventions 5 and 6): U = V = 0 is a saddle of
the factored posterior, and chains started elsewhere than near the MLE's rank-r
SVD did not agree at large N. Every method here starts from the balanced factors
of :func:`bayes_loco.fit_low_rank` and diagnoses only identified quantities (Θ
and θ_rtv in the RTV coordinates of a fixed basis).

The settings of :func:`fit_posterior` come in four groups, each a frozen
dataclass that also accepts a dict of its fields: :class:`Prior`,
:class:`NUTS`, :class:`MAP` and :class:`VI`. The fit's DataTree is laid out as
:mod:`bayes_loco.bayes.layout` describes: identified quantities in
``posterior``, the factors U, V in ``factors``, a ``prior``, a posterior
predictive with the observed labels, and the method's own groups.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import logging
import os
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
from threadpoolctl import threadpool_limits

from .._validation import check_int, check_option, check_rank, check_real
from ..coordinates import RTVBasis, check_coordinates, design, identified_directions, rtv_basis
from ..data import PreferenceData, checks_data
from ..exceptions import ConvergenceWarning, SamplerWarning
from ..frequentist.fgd import LowRankResult
from ..model import fisher_information, margins
from ..predict import Predictive
from ..results import (
    Diagnostics,
    FitStatus,
    InRTVCoordinates,
    Summary,
    SummaryHTML,
    data_header,
    diagnostics_header,
    penalty_ellipsoid,
    unidentified_note,
)
from ..sets import EllipsoidSet
from ..trees import CONSTANT_DATA, identified_coordinates
from . import dims as D
from .chart import (
    ANGLE_MAX,
    AUTO,
    CHART,
    FACTORED,
    PARAMETRIZATIONS,
    build_chart_model,
    chart_frame,
    chart_start,
)
from .credible import KINDS, credible_set
from .geometry import choose_geometry, default_start, ranking, troubled
from .layout import arrange, root_attrs
from .loocv import PosteriorLikelihood
from .model import balanced_factors, build_model
from .reduced import draws_moments, stacked_draws
from .samplers import sample_nutpie
from .settings import Prior, _set, prior_record, settings_group
from .ties import tie_prior, tie_record

METHODS = ("nuts", "map", "vi")
NUTS_SAMPLERS = ("pymc", "nutpie", "numpyro")
VI_METHODS = ("advi", "fullrank_advi")
# Sampler-stat names differ between the NUTS implementations (docs/design.md, 'Samplers').
_DEPTH_STATS = ("tree_depth", "depth")
_MAXDEPTH_STATS = ("reached_max_treedepth", "maxdepth_reached")
# Eigenvalues of the MAP's negative Hessian at or below this fraction of the largest are its null space
# (the rotations U R, V R): the Laplace approximation puts no mass along them.
LAPLACE_RTOL = 1e-10
# The PyMC loggers silenced when progressbar=False ("Finished [100%]", "Sequential sampling", ...).
RTV_IDENTIFIED = f"rtv_{D.IDENTIFIED_COORD}"
_PYMC_LOGGERS = ("pymc", "pymc.sampling.mcmc", "pymc.stats.convergence", "pymc.variational.inference",
                 "pymc.tuning.starting")
SUMMARY_COLUMNS = ("estimate", "std_err", "lower", "upper", "ess_bulk", "ess_tail", "r_hat")
# The target_accept values a divergent factored fit is advised to re-run with, in turn.
TARGET_ACCEPT_STEPS = (0.95, 0.99)


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


@dataclass(frozen=True)
class NUTS:
    """Settings of NUTS (``method="nuts"``).

    Attributes
    ----------
    draws, tune : int
        Draws kept and tuning steps, per chain.
    chains : int
    cores : int or None
        Chains sampled at once: processes for PyMC's sampler, threads for
        nutpie's. None (default): one per usable CPU, at most ``chains``
        (the process's CPU affinity). PyMC's own guess halves the CPU count to skip
        hyperthreads, which on a 2-core machine ran every chain on one core.
    sampler : {"pymc", "nutpie", "numpyro"} or None
        The NUTS implementation; None picks nutpie (a dependency of the
        package, PyMC 6's default) and PyMC's own where nutpie is missing (the
        fit records the one used). nutpie compiles the model with numba first
        (~10 s, less from its cache): on small problems ``"pymc"`` is faster.
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
    parametrization : {"auto", "chart", "factored"}
        The coordinates NUTS moves in; all give the same posterior of Θ (same
        prior, same likelihood). ``"chart"``: the identified chart of
        :mod:`bayes_loco.bayes.chart` for the leading ``chart_rank``
        components, without the rotation and scale ridges of (U, V) and
        preconditioned by the curvature at the start, so that the leapfrog
        steps per draw do not grow with N; the other components stay factored
        (near a lower-rank Θ the chart's coordinates of an undetermined
        component grow heavy tails). ``"factored"``: U and V themselves (the
        model of :func:`~bayes_loco.bayes.build_model`), whose steps per draw
        grow like √N. ``"auto"`` (default): the chart for the leading
        components whose column space the data determine at the start
        (:attr:`~bayes_loco.bayes.chart.ChartFrame.determined_rank`), the
        factored model where there are none; the fit's settings record what
        ran. docs/results.md ("Posterior geometry") measures them.
    chart_rank : int or None
        r₁, 1 ≤ r₁ ≤ r: how many leading components ``"chart"`` or ``"auto"``
        sample in chart coordinates. None (default): all r for ``"chart"``, the
        determined ones for ``"auto"``.
    blas_threads : int or None
        BLAS threads while nutpie or numpyro sample (their chains run as
        threads of this process); None leaves the BLAS library's own number.
        One (default) is fastest: the products here are small, and a threaded
        BLAS under parallel chains or a busy machine oversubscribes the cores
        (nutpie, N = 10,000, one other job running: 437 s with the library's
        two threads, 43 s with one). PyMC's sampler gives each chain's process
        one thread itself.
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
    parametrization: str = AUTO
    chart_rank: int | None = None
    blas_threads: int | None = 1

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
        check_option(self.parametrization, "nuts.parametrization", PARAMETRIZATIONS)
        if self.chart_rank is not None:
            _set(self, "chart_rank", check_int(self.chart_rank, "nuts.chart_rank", 1))
            if self.parametrization == FACTORED:
                raise ValueError("nuts.chart_rank is for nuts.parametrization 'chart' or 'auto', got "
                                 f"chart_rank={self.chart_rank} with 'factored'")
        if self.blas_threads is not None:
            _set(self, "blas_threads", check_int(self.blas_threads, "nuts.blas_threads", 1))


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


@dataclass(frozen=True)
class MAP:
    """Settings of the MAP fit (``method="map"``).

    Attributes
    ----------
    draws : int
        Draws of its Laplace approximation: the ``posterior`` group of the tree,
        so that ArviZ summarises a MAP fit with intervals instead of NaN (see
        :func:`fit_posterior`).
    """

    draws: int = 1000

    def __post_init__(self):
        _set(self, "draws", check_int(self.draws, "map.draws", 1))


# ------------------------------------------------------------------------------------ posterior


@dataclass(frozen=True, eq=False)
class Posterior(Predictive, InRTVCoordinates, SummaryHTML, PosteriorLikelihood):
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
        ArviZ DataTree (:mod:`bayes_loco.bayes.layout`). Its ``posterior``
        holds the identified quantities only, ``theta`` = Θ (context × feature)
        and ``theta_rtv`` = θ_rtv (rtv_coord, with an ``identified``
        coordinate), so ``az.diagnose``, ``az.summary`` and ArviZ's plots with
        default arguments look at nothing else; the factors U, V are in
        ``factors``. Also ``prior``, ``posterior_predictive`` (replicated labels
        ``y``) with ``observed_data``, ``preference_probability`` (``p``), and per
        method ``sample_stats`` (NUTS), ``point_estimate`` and
        ``optimizer_result`` (MAP), ``vi_loss`` (VI). Its ``attrs`` hold typed
        scalars (version, rank, method, sampler, chains, draws, k, k_eff, …)
        and the whole ``settings`` as JSON (``"settings"``), all of which netCDF
        can store, so ``tree.to_netcdf`` works as ArviZ users expect.
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
        ``ridge``, ``random_seed``, ``predictive_draws``, the group ``prior``
        and the method's group ``nuts`` (with the sampler that ran), ``map`` or
        ``vi``; ``ties`` unless the likelihood is the plain Bernoulli one (:mod:`.ties`).
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
        # C order, as a loaded posterior's: products with a Fortran-ordered copy take other BLAS paths and
        # differ in the last bits, so a posterior and its saved copy would give different sets.
        directions = np.ascontiguousarray(self.directions, dtype=float)
        k = self.basis.dim
        if directions.ndim != 2 or directions.shape[0] != k or directions.shape[1] > k:
            raise ValueError(f"Posterior.directions must have shape ({k}, k_eff), "
                             f"got {directions.shape}")
        object.__setattr__(self, "directions", directions)

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
        """The PyMC model that was fitted, on ``data``, ``rank`` and the prior settings.

        :func:`~bayes_loco.bayes.build_model`, or for NUTS in the chart
        parametrisation :func:`~bayes_loco.bayes.build_chart_model` around
        ``start`` (the same posterior of Θ). The fitted model itself after
        :func:`fit_posterior`; rebuilt after unpickling or loading. Reusable
        with ``pm.set_data``.
        """
        nuts = self.settings.get("nuts", {})
        return _model(self.data, self.rank, self.method, self.settings.get("prior"),
                      nuts.get("parametrization", FACTORED), nuts.get("chart_rank"), self.start)

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

    def _point(self, var: str) -> np.ndarray | None:
        """``var`` of the tree's ``point_estimate`` group (a MAP fit), or None."""
        if D.POINT_ESTIMATE in self.tree.children:
            return np.asarray(self.tree[D.POINT_ESTIMATE][var].values, dtype=float)
        return None

    @property
    def theta(self) -> np.ndarray:
        """Posterior mean Θ̄ (d_x × d_φ); for MAP, the MAP estimate."""
        point = self._point(D.THETA)
        return self.theta_draws.mean(axis=0) if point is None else point

    @property
    def estimate(self) -> np.ndarray:
        """Posterior mean of θ_rtv (k,); for MAP, the MAP estimate's θ_rtv."""
        point = self._point(D.THETA_RTV)
        return self.rtv_draws.mean(axis=0) if point is None else point

    @property
    def identified(self) -> np.ndarray:
        """Whether each coordinate e_i of θ_rtv lies in the span of ``directions`` (bool, (k,)).

        The tree carries it as ``constant_data.rtv_identified``.
        """
        return identified_coordinates(self.directions)

    @property
    def rtv_covariance(self) -> np.ndarray:
        """Posterior covariance of θ_rtv (k × k): of the draws (NUTS, VI) or of the Laplace draws (MAP)."""
        self._need_draws("rtv_covariance")
        return draws_moments(self.rtv_draws)[1]

    def _need_draws(self, what):
        if self.rtv_draws.shape[0] < 2:
            raise ValueError(f"{what} needs at least 2 posterior draws, but this fit "
                             f"(method={self.method!r}) has {self.rtv_draws.shape[0]}; fit with more draws")

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
        kind : {"credible", "sandwich", "draws", "quantile", "cvar"}
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
            relaxed objective only). ``"cvar"``: all draws as a CVaR set with
            tail 1 − level (a DrawsSet; both objectives): a policy's
            pessimistic value is the posterior CVaR of its value, below its
            value with posterior probability ≥ level. See
            :mod:`bayes_loco.bayes.credible` for what each guarantees.
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

    def _summary_table(self, level: float) -> pd.DataFrame:
        index = pd.Index(self.basis.labels(), name="coordinate")
        table = pd.DataFrame(np.nan, index=index, columns=list(SUMMARY_COLUMNS))
        table["estimate"] = self.estimate
        if self.rtv_draws.shape[0] < 2:  # one draw (map={"draws": 1}): nothing to summarise
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
                     "parametrization": self.settings["nuts"].get("parametrization", FACTORED),
                     "divergences": d.divergences, "max R-hat": d.max_rhat, "min ESS bulk": d.min_ess_bulk})
        if self.method == "vi":
            return (f"Posterior (VI, {d.method.removeprefix('vi-')})",
                    {"chains": 1, "draws": self.rtv_draws.shape[0],
                     "final loss": self.tree.attrs.get("final_loss")})
        return "Posterior (MAP, L-BFGS-B)", {"Laplace draws": self.rtv_draws.shape[0]}

    def summary(self, level: float = 0.95) -> Summary:
        """Posterior mean, sd and equal-tailed ``level`` interval of each identified coordinate of θ_rtv.

        The table has one row per coordinate e_i of θ_rtv (labels of
        ``basis.labels()``) that the data identify (e_i in the span of
        ``directions``), with ArviZ's ESS and R-hat; the header the data's
        dimensions, the fit's diagnostics and the sampler's facts. A MAP fit's
        estimate is the MAP, its sd and interval those of its Laplace
        approximation; a note says so.
        """
        level = check_real(level, "level", 0.0, 1.0, low_open=True, high_open=True)
        identified = self.identified
        table = self._summary_table(level)[identified]
        title, facts = self._title_and_facts()
        header = (data_header(self.data, self.basis, self.rank, self.k_eff)
                  | diagnostics_header(self.diagnostics) | facts)
        notes = list(self.diagnostics.warnings)
        if self.method == "map":
            notes.append("MAP: the estimate is the MAP; sd and intervals are those of its Laplace "
                         "approximation (a Gaussian on the tangent space of the rank-r matrices at the "
                         "MAP), not of the posterior.")
        elif self.method == "vi":
            notes.append("VI is a Gaussian approximation in (U, V): its intervals are typically too narrow. "
                         "Its draws are independent draws of one approximation (one chain: no R-hat).")
        notes += self._geometry_notes()
        notes += unidentified_note(int((~identified).sum()), self.k)
        return Summary(title, header, table, tuple(notes))

    def _geometry_notes(self) -> list[str]:
        """Where the chains started and which coordinates NUTS moved in, and why (:mod:`.geometry`)."""
        record = self.settings.get("geometry", {})
        notes = []
        if record:
            rank = record["chart_rank"]
            ran = record["parametrization"] + (f" (r₁ = {rank})" if rank else "")
            notes.append(f"NUTS moved in the {ran} coordinates: {record['reason']}.")
        start = record.get("start") or self.settings.get("start")
        if start:
            notes.append(f"The start: {start}.")
        return notes

    @property
    def advice(self) -> dict:
        """The NUTS settings the fit's warnings advise re-running with (empty when it converged).

        Update the NUTS settings of the fit with them: ``fit_posterior(data, rank, nuts=mine | post.advice)``,
        ``mine`` the dict the fit was called with.
        """
        return dict(self.settings.get("advice", {}))

    def __repr__(self) -> str:
        d = self.diagnostics
        draws = self.rtv_draws.shape[0]
        extra = ""
        if self.method == "nuts":
            extra = (f", divergences={d.divergences}, max R-hat={d.max_rhat:.4f}, "
                     f"min ESS bulk={d.min_ess_bulk:.0f}")
        return (f"Posterior(method={d.method!r}, rank={self.rank}, k={self.k}, k_eff={self.k_eff}, "
                f"draws={draws}{extra}, converged={d.converged}, seconds={d.seconds:.1f})")


def _model(data, rank, method, prior, parametrization, chart_rank, start) -> pm.Model:
    if method == "nuts" and parametrization == CHART:
        prior = settings_group(prior, Prior, "prior")
        frame = chart_frame(data, start.theta, rank, prior.scale, chart_rank)
        return build_chart_model(data, rank, frame, prior=prior)
    return build_model(data, rank, prior=prior)


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


def _start_fit(data, rank, start, ridge, scale) -> tuple[LowRankResult, float, str]:
    """The start of every chain, the ridge it was fitted with, and a note where that is not ``ridge``.

    :func:`~.geometry.default_start` when none is given.
    """
    if start is None:
        return default_start(data, rank, ridge, scale)
    if not isinstance(start, LowRankResult):
        raise TypeError(f"start must be a LowRankResult, got {type(start).__name__}")
    if start.rank != rank or start.theta.shape != (data.d_x, data.d_phi):
        raise ValueError(f"start has rank {start.rank} and Θ of shape {start.theta.shape}; "
                         f"expected rank {rank} and ({data.d_x}, {data.d_phi})")
    return start, ridge, ""


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
    """``nuts`` with the sampler that will run (nutpie when installed and none was named, else PyMC's)
    and the cores it will use (one per usable CPU, at most one per chain, when none were named)."""
    sampler = nuts.sampler or ("nutpie" if "nutpie" in available_samplers() else "pymc")
    if sampler not in available_samplers():
        raise ValueError(f"nuts.sampler={sampler!r} is not installed; available: "
                         f"{', '.join(available_samplers())}")
    cores = min(nuts.chains, _usable_cores()) if nuts.cores is None else nuts.cores
    return dataclasses.replace(nuts, sampler=sampler, cores=cores)


def _rms(a) -> float:
    return float(np.sqrt(np.mean(a * a))) or 1.0


def _factor_start(u0, v0, jitter: float, rng) -> dict:
    """The balanced factors plus a jitter of ``jitter`` times their root-mean-square entry.

    Some jitter is needed even for a single shared start: nutpie refuses a start
    where a gradient entry is exactly 0 ("bad initial gradient"), which is the
    case at the minimum-norm MLE for rows of V that no comparison reaches.
    """
    return {D.LEFT: u0 + jitter * _rms(u0) * rng.standard_normal(u0.shape),
            D.RIGHT: v0 + jitter * _rms(v0) * rng.standard_normal(v0.shape)}


# -------------------------------------------------------------------------------------- methods


@contextlib.contextmanager
def _quiet(quiet: bool):
    """Silence PyMC's log lines ("Sequential sampling …", "Finished [100%] …") while ``quiet``."""
    if not quiet:
        yield
        return
    loggers = [logging.getLogger(name) for name in _PYMC_LOGGERS]
    levels = [lg.level for lg in loggers]
    try:
        for lg in loggers:
            lg.setLevel(logging.CRITICAL + 1)
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def _usable_cores() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "process_cpu_count"):  # Python ≥ 3.13
        return os.process_cpu_count() or 1
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _sample_nuts(model, nuts: NUTS, draw_start, seed: int, progressbar: bool, key=None) -> xr.DataTree:
    """NUTS from ``draw_start(rng)`` (one start per chain for PyMC's sampler, one shared otherwise).

    nutpie runs through :func:`~.samplers.sample_nutpie`, which compiles a model of
    the structure ``key`` once per process; the others through ``pm.sample``. The
    sampler adds no jitter of its own on top of the start's.
    """
    rng = np.random.default_rng(seed)
    per_chain = nuts.sampler == "pymc"
    starts = [draw_start(rng) for _ in range(nuts.chains if per_chain else 1)]
    limit = contextlib.nullcontext()
    if not per_chain and nuts.blas_threads is not None:
        limit = threadpool_limits(limits=nuts.blas_threads)
    if nuts.sampler == "nutpie":
        with limit:
            return sample_nutpie(model, key, starts[0], draws=nuts.draws, tune=nuts.tune, chains=nuts.chains,
                                 cores=nuts.cores, seed=seed, target_accept=nuts.target_accept,
                                 progressbar=progressbar)
    kwargs = dict(draws=nuts.draws, tune=nuts.tune, chains=nuts.chains, cores=nuts.cores, random_seed=seed,
                  progressbar=progressbar, quiet=not progressbar, nuts_sampler=nuts.sampler,
                  initvals=starts if per_chain else starts[0], target_accept=nuts.target_accept,
                  compute_convergence_checks=False, model=model)
    if per_chain:
        kwargs["init"] = "adapt_diag"  # no jitter on top of ours
    else:
        kwargs["nuts"] = {"jitter": False, "chain_method": _jax_chain_method(nuts.chains)}
        if nuts.blas_threads is not None:
            # PyMC's own limiter ("auto": as many threads as cores) would replace ours.
            kwargs["blas_cores"] = None
    with warnings.catch_warnings(), limit:
        warnings.filterwarnings("ignore", category=FutureWarning)
        return pm.sample(**kwargs)


def _model_key(model: pm.Model, frame, prior: Prior) -> tuple:
    """What fixes the compiled log density of a model (:mod:`.samplers`): everything but the shared inputs.

    The parametrisation and its ranks and span dimensions, the prior's settings
    (constants of the graph), the coordinates (the names nutpie labels draws
    with; the comparisons by their count), and the data containers' names (which
    likelihood the graph holds: Bernoulli, "half" or Davidson's, :mod:`.ties`).
    """
    shape = None if frame is None else (frame.rank, frame.chart_rank, frame.left.shape, frame.right.shape,
                                         frame.left_null.shape, frame.right_null.shape)
    coords = tuple((name, len(values) if name == D.COMPARISON else tuple(map(str, values)))
                   for name, values in model.coords.items())
    return (shape, dataclasses.astuple(prior), coords, tuple(sorted(var.name for var in model.data_vars)))


def _find_map(model, u0, v0, seed: int, progressbar: bool) -> xr.DataTree:
    """``pm.find_MAP`` (L-BFGS-B) from the balanced factors; the DataTree keeps its ``optimizer_result``."""
    return pm.find_MAP(initvals={D.LEFT: u0, D.RIGHT: v0}, jitter=False, return_inferencedata=True,
                       progressbar=progressbar, random_seed=seed, model=model)


def _value_point(model: pm.Model, posterior: xr.DataTree) -> dict:
    """The MAP (chain 0, draw 0 of ``posterior``) as a point of the model's value variables (transformed)."""
    import pytensor.tensor as pt

    point = {}
    for rv in model.free_RVs:
        value = np.asarray(posterior[rv.name].values)[0, 0]
        transform = model.rvs_to_transforms.get(rv)
        if transform is not None:
            value = transform.forward(pt.as_tensor_variable(value), *rv.owner.inputs).eval()
        point[model.rvs_to_values[rv].name] = np.asarray(value, dtype=model.rvs_to_values[rv].dtype)
    return point


def _negative_hessian(model: pm.Model, point: dict, u_star: np.ndarray, v_star: np.ndarray) -> np.ndarray:
    """−∇² log p(U, V | y) at (U*, V*), by central differences of the model's compiled gradient.

    2·(d_x + d_φ)·r gradient evaluations: PyTensor's symbolic Hessian took ~30 s to
    compile on a 20-parameter model, the gradient well under one.
    """
    grad = model.compile_dlogp(vars=[model[D.LEFT], model[D.RIGHT]], jacobian=False)
    x0 = np.concatenate([u_star.ravel(), v_star.ravel()])
    n_u = u_star.size
    step = 1e-5 * max(1.0, _rms(x0))

    def gradient(x):
        at = dict(point)
        at[D.LEFT] = x[:n_u].reshape(u_star.shape)
        at[D.RIGHT] = x[n_u:].reshape(v_star.shape)
        return np.asarray(grad(at), dtype=float)

    columns = []
    for i in range(x0.size):
        e = np.zeros_like(x0)
        e[i] = step
        columns.append((gradient(x0 + e) - gradient(x0 - e)) / (2 * step))
    hessian = -np.stack(columns, axis=1)
    return 0.5 * (hessian + hessian.T)


def laplace_theta(model: pm.Model, map_tree: xr.DataTree, draws: int, seed: int) -> xr.DataArray:
    """Draws of Θ from the Laplace approximation of the factored posterior at the MAP (chain 1).

    H is the negative Hessian of log p(U, V | y) (prior included; with
    ``prior.hyper`` the scales are held at their MAP values) at the MAP (U*, V*).
    Its null space holds the rotations U R, V R, which do not move Θ; the
    approximation is N(0, H⁺) for (dU, dV) on the rest (eigenvalues of H at or
    below :data:`LAPLACE_RTOL` of the largest, or negative, are left out), pushed
    to Θ through the linearisation Θ* + dU V*ᵀ + U* dVᵀ: a Gaussian on the
    tangent space of the rank-r matrices at the MAP, centred there, so θ_rtv
    (linear in Θ) is Gaussian around the MAP's θ_rtv. Along directions no
    comparison reaches H is the prior's curvature alone, so there the spread is
    the prior's.
    """
    post = map_tree[D.POSTERIOR]
    u_star = np.asarray(post[D.LEFT].values, dtype=float)[0, 0]
    v_star = np.asarray(post[D.RIGHT].values, dtype=float)[0, 0]
    hessian = _negative_hessian(model, _value_point(model, post), u_star, v_star)
    vals, vecs = np.linalg.eigh(hessian)
    keep = vals > LAPLACE_RTOL * max(vals.max(), np.finfo(float).tiny)
    factor = vecs[:, keep] / np.sqrt(vals[keep])
    rng = np.random.default_rng([seed, 31337])
    steps = rng.standard_normal((draws, factor.shape[1])) @ factor.T
    n_u = u_star.size
    d_u = steps[:, :n_u].reshape(draws, *u_star.shape)
    d_v = steps[:, n_u:].reshape(draws, *v_star.shape)
    theta = u_star @ v_star.T + d_u @ v_star.T + u_star @ d_v.transpose(0, 2, 1)
    like = post[D.THETA]
    coords = {"chain": [0], "draw": np.arange(draws), D.CONTEXT: like.coords[D.CONTEXT].values,
              D.FEATURE: like.coords[D.FEATURE].values}
    return xr.DataArray(theta[None], dims=("chain", "draw", D.CONTEXT, D.FEATURE), coords=coords)


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
    spread = np.full(n, 0.1)  # the other coordinates (log-scales with prior.hyper, Davidson's log ν)
    for name, part in ((D.LEFT, sigma[:u0.size]), (D.RIGHT, sigma[u0.size:])):
        spread[group.ordering[name][1]] = part
    tril = np.zeros((n, n))
    tril[np.diag_indices(n)] = np.log(np.expm1(spread))  # inverse of softplus (rho2sigma)
    group.params_dict["L_tril"].set_value(tril[np.tril_indices(n)])
    return inference


def _fit_vi(model, vi: VI, u0, v0, seed: int, progressbar: bool) -> tuple[xr.DataTree, np.ndarray]:
    """Fit ADVI with Adam and draw from it (one chain); returns the draws and the loss of every iteration."""
    inference = _vi_inference(model, vi, u0, v0, seed)
    with model:
        try:
            approx = inference.fit(n=vi.iterations, progressbar=progressbar,
                                   obj_optimizer=pm.adam(learning_rate=vi.learning_rate))
        except FloatingPointError as exc:
            raise ValueError(f"ADVI diverged: its parameters became NaN with vi.learning_rate="
                             f"{vi.learning_rate:g}; lower vi.learning_rate (the default is "
                             f"{VI.learning_rate}) or use method='nuts'") from exc
        tree = approx.sample(vi.draws, random_seed=seed + 1)
    return tree, np.asarray(approx.hist, dtype=float)


def _final_loss(loss: np.ndarray) -> float:
    """The mean loss of the last 1 % of the iterations."""
    return float(np.mean(loss[-max(1, loss.size // 100):]))


# ---------------------------------------------------------------------------------- diagnostics


def _stat(stats, names):
    for name in names:
        if name in stats.data_vars:
            return np.asarray(stats[name].values)
    return None


def _worst(table: pd.DataFrame, column: str, largest: bool) -> tuple[float, str]:
    """The extreme value of ``column`` (NaN skipped) and the row (quantity) where it occurs."""
    values = table[column].to_numpy(float)
    if np.all(np.isnan(values)):
        return np.nan, ""
    i = int(np.nanargmax(values) if largest else np.nanargmin(values))
    return float(values[i]), str(table.index[i])


def _unidentified_note(name: str, tree) -> str:
    """A remark when ``name`` (an az.summary row) is a θ_rtv coordinate that no comparison reaches."""
    chart = tree[CONSTANT_DATA]
    if RTV_IDENTIFIED not in chart.data_vars:
        return ""
    for label, identified in zip(chart[D.RTV_COORD].values, chart[RTV_IDENTIFIED].values, strict=True):
        if name == f"{D.THETA_RTV}[{label}]" and not identified:
            return " (a coordinate no comparison reaches: its posterior is the prior's)"
    return ""


def _advice(nuts: NUTS, divergences: int | None, rhat_bad: bool, ess_bad: bool) -> dict:
    """The NUTS settings to re-run with, each a step that improves this fit (empty: none known).

    Divergences in the chart: the factored model (:mod:`.geometry`). Divergences in
    the factored model: the next ``target_accept`` of :data:`TARGET_ACCEPT_STEPS`
    above the one that ran (none past the last: smaller steps no longer help). R-hat
    or ESS short: twice the draws (ESS grows about linearly with them), and with R-hat
    twice the tuning too. Each suggestion is computed from the settings that ran, so a
    fit re-run as advised is never advised the same again.
    """
    advice = {}
    if divergences:
        if nuts.parametrization == CHART:
            advice["parametrization"] = FACTORED
        else:
            higher = [t for t in TARGET_ACCEPT_STEPS if t > nuts.target_accept + 1e-9]
            if higher:
                advice["target_accept"] = higher[0]
    if rhat_bad or ess_bad or "target_accept" in advice:
        advice["draws"] = 2 * nuts.draws
    if rhat_bad:
        advice["tune"] = 2 * max(nuts.tune, nuts.draws)
    return advice


def _nuts_diagnostics(tree, nuts: NUTS, seconds: float) -> tuple[Diagnostics, dict]:
    """Divergences, tree depth, and R-hat/ESS over every entry of Θ and θ_rtv; a message for each problem.

    The messages name the worst quantity (its ArviZ label); the advice (:func:`_advice`)
    is returned beside the diagnostics and written into each message as the exact
    ``nuts={...}`` to pass.
    """
    stats = tree[D.SAMPLE_STATS]
    div, depth, maxd = (_stat(stats, names) for names in (("diverging",), _DEPTH_STATS, _MAXDEPTH_STATS))
    both = pd.concat([az.summary(tree, var_names=[var], kind="diagnostics", round_to="none")
                      for var in (D.THETA_RTV, D.THETA)])
    divergences = None if div is None else int(div.sum())
    max_rhat, at_rhat = _worst(both, "r_hat", largest=True)
    min_bulk, at_bulk = _worst(both, "ess_bulk", largest=False)
    min_tail, at_tail = _worst(both, "ess_tail", largest=False)
    chains = tree[D.POSTERIOR].sizes.get("chain", 1)
    rhat_bad = chains > 1 and not max_rhat <= nuts.rhat_max
    ess_bad = not min(min_bulk, min_tail) >= nuts.ess_min
    advice = _advice(nuts, divergences, rhat_bad, ess_bad)
    rerun = f"; re-run with nuts={advice}" if advice else ""
    messages = []
    if divergences:
        if "parametrization" in advice:
            why = "the chart's coordinates are ratios that are near-singular where the data are few"
        elif "target_accept" in advice:
            why = f"smaller leapfrog steps (target_accept {advice['target_accept']}) follow the curvature"
        else:
            why = (f"they persist at target_accept {nuts.target_accept}: the draws near them may be biased; "
                   "compare a lower rank (select_rank) or a tighter prior (prior={'scale': ...})")
        messages.append(f"{divergences} divergent transitions after tuning in the {nuts.parametrization} "
                        f"coordinates: {why}{rerun}")
    if rhat_bad:
        messages.append(f"max R-hat {max_rhat:.4f} at {at_rhat}{_unidentified_note(at_rhat, tree)} > "
                        f"{nuts.rhat_max} (over Θ and θ_rtv): the chains disagree{rerun}")
    if ess_bad and not np.isfinite(min(min_bulk, min_tail)):
        messages.append(f"ESS cannot be estimated from {chains} chain(s) × {nuts.draws} draw(s), so this fit "
                        f"is not checked{rerun}")
    elif ess_bad:
        worst = (f"bulk {min_bulk:.0f} at {at_bulk}{_unidentified_note(at_bulk, tree)}, "
                 f"tail {min_tail:.0f} at {at_tail}{_unidentified_note(at_tail, tree)}")
        messages.append(f"min ESS over Θ and θ_rtv is {worst} < {nuts.ess_min}{rerun}")
    converged = not messages
    message = (f"{chains} chains × {nuts.draws} draws after {nuts.tune} tuning steps: {divergences} "
               f"divergences, max R-hat {max_rhat:.4f} ({at_rhat}), min ESS bulk {min_bulk:.0f} "
               f"({at_bulk}) / tail {min_tail:.0f} ({at_tail})")
    diagnostics = Diagnostics(
        f"nuts-{nuts.sampler}", converged, nuts.draws,
        FitStatus.CONVERGED if converged else FitStatus.SAMPLER_WARNINGS, message, tuple(messages), seconds,
        divergences=divergences, max_depth_hits=None if maxd is None else int(maxd.sum()),
        mean_tree_depth=None if depth is None else float(depth.mean()),
        max_rhat=max_rhat, min_ess_bulk=min_bulk, min_ess_tail=min_tail)
    return diagnostics, advice


def _map_diagnostics(tree, seconds: float) -> Diagnostics:
    """The optimiser's own account, from find_MAP's ``optimizer_result`` group."""
    if D.OPTIMIZER_RESULT not in tree.children:
        return Diagnostics("map", True, None, FitStatus.CONVERGED, "find_MAP gave no optimizer_result",
                           seconds=seconds)
    result = tree[D.OPTIMIZER_RESULT]
    success = bool(result["success"].values) if "success" in result.data_vars else True
    n_iter = int(result["nit"].values) if "nit" in result.data_vars else None
    message = str(result["message"].values) if "message" in result.data_vars else ""
    messages = () if success else (
        f"the MAP search (L-BFGS-B) stopped before converging after {n_iter} iterations: {message}",)
    return Diagnostics("map", success, n_iter, FitStatus.CONVERGED if success else FitStatus.NOT_CONVERGED,
                       message, messages, seconds)


def _diagnose(tree, method: str, vi: VI, seconds: float) -> Diagnostics:
    """The diagnostics of a MAP or VI fit (NUTS: :func:`_nuts_diagnostics`)."""
    if method == "map":
        return _map_diagnostics(tree, seconds)
    message = f"{vi.iterations} iterations of {vi.method}, final loss {tree.attrs['final_loss']:.6g}"
    return Diagnostics(f"vi-{vi.method}", True, vi.draws, FitStatus.CONVERGED, message, seconds=seconds)


# ---------------------------------------------------------------------------------------- entry


@checks_data
def fit_posterior(data: PreferenceData, rank: int, *, method: str = "nuts", ties: str = "half",
                  prior: Prior | dict | None = None,
                  nuts: NUTS | dict | None = None, map: MAP | dict | None = None,
                  vi: VI | dict | None = None, start: LowRankResult | None = None,
                  basis: RTVBasis | LowRankResult | None = None, ridge: float = 0.0, random_seed: int = 0,
                  predictive_draws: int = 500, progressbar: bool = True) -> Posterior:
    """Posterior of Θ = U Vᵀ under the factored model, with θ_rtv in the DataTree.

    Parameters
    ----------
    data : PreferenceData
    rank : int
        r.
    method : {"nuts", "map", "vi"}
        ``"nuts"``: ``pm.sample``; ``"map"``: ``pm.find_MAP`` (L-BFGS-B), a
        point estimate, with a Laplace approximation at it for the tree;
        ``"vi"``: ADVI, a fast Gaussian approximation in (U, V) whose spread is
        typically too small (mean-field ignores the posterior correlations of U
        and V).
    ties : {"half", "davidson"}
        The likelihood of ties and weights (:mod:`bayes_loco.bayes.ties`): a tie half
        a win each way, or Davidson's model with ν (prior: ``prior.nu_scale``).
    prior, nuts, map, vi : Prior, NUTS, MAP, VI, a dict of their fields, or None
        The settings groups (None: the defaults): the prior of
        :func:`~bayes_loco.bayes.build_model`, and the settings of NUTS, MAP and
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
        Seeds the sampler, the optimiser, the per-chain jitter, and the prior,
        Laplace and predictive draws.
    predictive_draws : int
        Posterior draws (evenly spaced within each chain) for the tree's
        ``posterior_predictive`` and ``preference_probability`` groups, and the
        number of ``prior`` draws; capped so that N × draws stays within
        :data:`bayes_loco.bayes.layout.MAX_PREDICTIVE_VALUES`. 0 leaves the
        three groups out.
    progressbar : bool
        PyMC's progress bars and log lines; False silences both.

    Returns
    -------
    Posterior
        Its ``settings`` (and, as JSON, its tree's ``attrs["settings"]``) record
        the settings, with the NUTS sampler that ran. Its ``tree`` is laid out
        as :mod:`bayes_loco.bayes.layout` describes.

    Notes
    -----
    MAP. The tree's ``posterior`` holds ``map.draws`` draws of the Laplace
    approximation at the MAP (:func:`laplace_theta`: a Gaussian on the tangent
    space of the rank-r matrices there, with the curvature of likelihood and
    prior), so ``az.summary`` gives intervals, not NaN; the MAP itself is the
    ``point_estimate`` group, and ``Posterior.theta``/``estimate`` read it.
    The package's sets of a MAP fit are built from the Laplace draws.

    VI. The draws are independent draws from one fitted approximation: one
    chain (``chains`` of ``nuts`` does not apply), so R-hat is undefined; the
    loss of every iteration is the ``vi_loss`` group.

    Warns
    -----
    SamplerWarning
        NUTS diverged or mixed poorly (see :class:`NUTS`); the message names the
        worst quantity. ConvergenceWarning: the MAP search did not converge.
    """
    rank = check_rank(rank, data.d_x, data.d_phi)
    check_option(method, "method", METHODS)
    prior = tie_prior(settings_group(prior, Prior, "prior"), ties)
    nuts = settings_group(nuts, NUTS, "nuts")
    map_settings = settings_group(map, MAP, "map")
    vi = settings_group(vi, VI, "vi")
    ridge = check_real(ridge, "ridge", 0.0)
    random_seed = check_int(random_seed, "random_seed", 0)
    predictive_draws = check_int(predictive_draws, "predictive_draws", 0)
    if not isinstance(progressbar, bool):
        raise TypeError(f"progressbar must be a bool, got {progressbar!r}")
    if method == "nuts":
        nuts = _resolve_sampler(nuts)
    start, start_ridge, start_note = _start_fit(data, rank, start, ridge, prior.scale)
    basis = _resolve_basis(basis, start, rank, data)
    directions = identified_directions(basis, data)
    run = _Run(data, rank, prior, basis, directions, predictive_draws, random_seed, progressbar, start,
               start_ridge)
    advice = {}
    if method == "nuts":
        geometry = choose_geometry(data, rank, start.theta, prior.scale, nuts.parametrization,
                                   nuts.chart_rank)
        post, advice = run.nuts(geometry, nuts)
        first = post
        if geometry.automatic and geometry.frame is not None and troubled(post.diagnostics, nuts.rhat_max):
            factored, factored_advice = run.nuts(dataclasses.replace(geometry, frame=None), nuts)
            if ranking(factored.diagnostics, nuts.rhat_max) > ranking(post.diagnostics, nuts.rhat_max):
                post, advice = factored, factored_advice
        extra = {"geometry": _geometry_record(geometry, post, first, start_note)}
    else:
        post = run.optimise(method, map_settings, vi)
        extra = {"start": start_note} if start_note else {}
    if advice:
        extra["advice"] = advice
    if extra:
        post = _with_settings(post, extra)
    category = ConvergenceWarning if method == "map" else SamplerWarning
    for message in post.diagnostics.warnings:
        warnings.warn(f"fit_posterior: {message}", category, stacklevel=3)
    return post


def _note_loose(diagnostics: Diagnostics, frame) -> Diagnostics:
    """``diagnostics`` with a warning naming the charted components the data leave loose, if any."""
    charted = frame.angles[:frame.chart_rank]
    loose = ", ".join(f"{j} ({a:.2f} rad)" for j, a in enumerate(charted) if a > ANGLE_MAX)
    if not loose:
        return diagnostics
    return dataclasses.replace(diagnostics, warnings=(*diagnostics.warnings, (
        f"NUTS ran in the chart although the data leave the column space of component(s) {loose} "
        f"loose (> {ANGLE_MAX} rad at the start): their chart coordinates have heavy tails. Chart fewer "
        "components (nuts={'chart_rank': ...}; the others stay factored) or none "
        "(nuts={'parametrization': 'auto'} chooses); if a component's singular value is within noise of 0, "
        "a lower rank may fit the data as well (select_rank)")))


def _geometry_record(geometry, post: Posterior, first: Posterior, start_note: str) -> dict:
    """What ran and why, for ``settings["geometry"]``: the choice, its reason, and a fall-back's cause."""
    ran = post.settings["nuts"]
    record = {"parametrization": ran["parametrization"], "chart_rank": ran["chart_rank"],
              "reason": geometry.reason, "fell_back": post is not first and first.settings["nuts"]
              ["parametrization"] != ran["parametrization"]}
    if post is not first:
        d = first.diagnostics
        record["first"] = {"parametrization": first.settings["nuts"]["parametrization"],
                           "chart_rank": first.settings["nuts"]["chart_rank"], "divergences": d.divergences,
                           "max_rhat": d.max_rhat, "min_ess_bulk": d.min_ess_bulk,
                           "min_ess_tail": d.min_ess_tail, "seconds": d.seconds}
        record["reason"] += (f"; the chart gave {d.divergences} divergences, R-hat {d.max_rhat:.3f}, ESS "
                             f"{d.min_ess_bulk:.0f} in {d.seconds:.0f} s, so the factored model ran too and "
                             "was kept")
    if start_note:
        record["start"] = start_note
    return record


def _with_settings(post: Posterior, extra: dict) -> Posterior:
    """``post`` with ``extra`` merged into its settings (and its tree's JSON copy of them)."""
    settings = {**post.settings, **extra}
    post.tree.attrs["settings"] = json.dumps(settings)
    new = dataclasses.replace(post, settings=settings)
    new.__dict__["model"] = post.__dict__.get("model")
    return new


@dataclass(frozen=True)
class _Run:
    """What every attempt of one :func:`fit_posterior` call shares: data, prior, start, basis, seeds."""

    data: PreferenceData
    rank: int
    prior: Prior
    basis: RTVBasis
    directions: np.ndarray
    predictive_draws: int
    seed: int
    progressbar: bool
    start: LowRankResult
    ridge: float

    def settings(self, method: str, group) -> dict:
        return {"rank": self.rank, "method": method, "prior": prior_record(self.prior), "ridge": self.ridge,
                "random_seed": self.seed, "predictive_draws": self.predictive_draws,
                method: dataclasses.asdict(group), **tie_record(self.data, self.prior)}

    def nuts(self, geometry, nuts: NUTS) -> tuple[Posterior, dict]:
        """One NUTS run in ``geometry``'s coordinates: sample, arrange the tree, diagnose."""
        nuts = dataclasses.replace(nuts, parametrization=geometry.parametrization,
                                   chart_rank=geometry.chart_rank)
        frame, prior = geometry.frame, self.prior
        if frame is not None:
            model = build_chart_model(self.data, self.rank, frame, prior=prior)

            def draw_start(rng):
                return chart_start(frame, nuts.init_jitter, rng, prior.scale)
        else:
            model = build_model(self.data, self.rank, prior=prior)
            u0, v0 = balanced_factors(self.start.theta, self.rank)

            def draw_start(rng):
                return _factor_start(u0, v0, nuts.init_jitter, rng)
        with _quiet(not self.progressbar):
            t0 = time.perf_counter()
            raw = _sample_nuts(model, nuts, draw_start, self.seed, self.progressbar,
                               _model_key(model, frame, prior))
            seconds = time.perf_counter() - t0
        tree = self._arrange(raw, "nuts", nuts, (nuts.sampler, nuts.chains, nuts.draws, "NUTS draws (MCMC)"))
        diagnostics, advice = _nuts_diagnostics(tree, nuts, seconds)
        if diagnostics.warnings and frame is not None and not geometry.automatic:
            diagnostics = _note_loose(diagnostics, frame)
        return self._posterior(tree, diagnostics, "nuts", nuts, model), advice

    def optimise(self, method: str, map_settings: MAP, vi: VI) -> Posterior:
        """A MAP (with its Laplace draws) or VI fit from the start's balanced factors."""
        model = build_model(self.data, self.rank, prior=self.prior)
        u0, v0 = balanced_factors(self.start.theta, self.rank)
        laplace, loss = None, None
        with _quiet(not self.progressbar):
            t0 = time.perf_counter()
            if method == "map":
                raw = _find_map(model, u0, v0, self.seed, self.progressbar)
            else:
                raw, loss = _fit_vi(model, vi, u0, v0, self.seed, self.progressbar)
            seconds = time.perf_counter() - t0
            if method == "map":
                laplace = laplace_theta(model, raw, map_settings.draws, self.seed)
        facts = {"map": ("L-BFGS-B", 1, map_settings.draws,
                         "independent draws of the Laplace approximation at the MAP (one chain)"),
                 "vi": (vi.method, 1, vi.draws,
                        "independent draws of the fitted ADVI approximation (one chain)")}[method]
        group = map_settings if method == "map" else vi
        tree = self._arrange(raw, method, group, facts, laplace=laplace, loss=loss)
        return self._posterior(tree, _diagnose(tree, method, vi, seconds), method, group, model)

    def _arrange(self, raw, method, group, facts, laplace=None, loss=None) -> xr.DataTree:
        from .. import __version__

        sampler, chains, draws, representation = facts
        attrs = root_attrs(self.settings(method, group), __version__, sampler=sampler, chains=chains,
                           draws=draws, k=self.basis.dim, k_eff=self.directions.shape[1],
                           representation=representation, predictive_draws=self.predictive_draws)
        if loss is not None:
            attrs["final_loss"] = _final_loss(loss)
        return arrange(raw, method=method, basis=self.basis, directions=self.directions, data=self.data,
                       prior=self.prior, predictive_draws=self.predictive_draws, seed=self.seed,
                       root_attrs=attrs, laplace=laplace, loss=loss)

    def _posterior(self, tree, diagnostics, method, group, model) -> Posterior:
        post = Posterior(tree, self.basis, self.start, self.directions, diagnostics, method, self.data,
                         self.settings(method, group))
        post.__dict__["model"] = model  # the fitted model itself fills the cache of Posterior.model
        return post
