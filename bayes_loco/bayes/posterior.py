"""The result of :func:`~bayes_loco.bayes.fit_posterior`: :class:`Posterior`, a fit in RTV coordinates.

A :class:`Posterior` is plain data (its DataTree, basis, start, identified
directions, diagnostics and settings) and follows the
:class:`~bayes_loco.results.Fit` protocol like the frequentist fits: ``theta``,
``estimate``, ``penalty_set``, ``calibrated_set``, ``diagnostics``, ``summary``.
Its tie model, ν and pointwise log-likelihood come from
:class:`~.loocv.PosteriorLikelihood`; its PyMC model is rebuilt on demand.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import arviz as az
import numpy as np
import pandas as pd
import pymc as pm
import xarray as xr

from .._iowrite import save as save_result
from .._validation import LEVEL, check_level, check_option
from ..coordinates import RTVBasis, check_coordinates
from ..data import PreferenceData
from ..design import information, reached_coordinates
from ..frequentist.fgd import LowRankResult
from ..model import fisher_weights, margins
from ..predict import DrawsPredictive
from ..results import (
    Diagnostics,
    InRTVCoordinates,
    Summary,
    SummaryHTML,
    data_header,
    diagnostics_header,
    interval_label,
)
from ..sets import EllipsoidSet
from ..summary_tables import contrast_note, feature_contrasts, unidentified_note
from ..trees import identified_coordinates, identified_coords
from . import dims as D
from .chart import build_chart_model, chart_frame
from .credible import KINDS, credible_set
from .diagnostics import geometry_notes, leapfrog_steps
from .loocv import PosteriorLikelihood
from .model import build_model
from .plan import plan_notes
from .reduced import draws_moments, stacked_draws
from .settings import CHART, FACTORED, METHODS, Prior, settings_group

SUMMARY_COLUMNS = ("estimate", "std_err", "lower", "upper", "ess_bulk", "ess_tail", "r_hat")


@dataclass(frozen=True, eq=False)
class Posterior(DrawsPredictive, InRTVCoordinates, SummaryHTML, PosteriorLikelihood):
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
        Û, V̂ and r of the fit whose RTV coordinates define θ_rtv (``basis=`` of
        :func:`~bayes_loco.bayes.fit_posterior`).
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
        :func:`~bayes_loco.bayes.fit_posterior`; rebuilt after unpickling or loading. Reusable
        with ``pm.set_data``.
        """
        nuts = self.settings.get("nuts", {})
        return _model(self.data, self.rank, self.method, self.ties, self.settings.get("prior"),
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

    def identified_coords(self) -> dict[str, list[str]]:
        """``coords=`` for ArviZ: the identified θ_rtv coordinates (``trees.identified_coords``).

        Returns
        -------
        dict
            ``{"rtv_coord": [labels of the identified coordinates]}``.

        Examples
        --------
        >>> post.identified_coords()["rtv_coord"][:3]
        ['11 (u0, v0)', '11 (u0, v1)', '11 (u1, v0)']
        >>> import arviz as az
        >>> table = az.summary(post.tree, var_names=["theta_rtv"], coords=post.identified_coords())
        >>> len(table) == post.k_eff
        True
        """
        return identified_coords(self.tree)

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
        Gram matrix Σ_t z_t z_tᵀ, summed by :func:`bayes_loco.design.information`
        without forming Z); the set has no level (docs/design.md, convention 2).

        Parameters
        ----------
        c2 : float
            C₂ ≥ 0, the paper's 5 by default.

        Returns
        -------
        EllipsoidSet
            ``kind="gram"``, no level.

        Examples
        --------
        >>> post.penalty_set(c2=5.0)
        EllipsoidSet(kind='gram', k=16, k_eff=8, radius=1.155)
        """
        gram = information(self.basis, self.data)  # W of the comparisons the rows stand for
        return EllipsoidSet.penalty(self.estimate, gram, self.data.n_comparisons, self.basis, c2)

    def calibrated_set(self, level: float = LEVEL, kind: str | None = "credible", *, identified: bool = True,
                       population=None):
        """A ``kind`` set for θ_rtv at ``level`` that :func:`bayes_loco.pessimistic_policy` accepts.

        The set's ``.kind`` is ``kind``.

        Parameters
        ----------
        level : float
            Level in (0, 1).
        kind : {"credible", "sandwich", "draws", "quantile", "cvar", "family"}
            ``"credible"`` (default; None means it too): the Gaussian credible
            ellipsoid around the posterior mean with W = inverse posterior
            covariance of the identified directions and R² = χ²_k_eff(level)
            (an EllipsoidSet; both objectives). ``"sandwich"``: the same
            ellipsoid with the sandwich shape Σ F Σ, F the Fisher information
            at the posterior mean Θ̄ (:meth:`information`) — a confidence set
            for θ_rtv centred at θ̄; near a low-rank Θ* the posterior is wider
            than the error of its mean and the credible set over-covers
            (docs/results/coverage.md measures both). ``"draws"``: the convex hull of
            the ``level`` fraction of draws with the smallest Mahalanobis
            distance (a DrawsSet; both objectives). ``"quantile"``: the
            pointwise (1 − level) posterior quantile of θᵀz (a QuantileSet;
            relaxed objective only). ``"cvar"``: all draws as a CVaR set with
            tail 1 − level (a DrawsSet; both objectives): a policy's
            pessimistic value is the posterior CVaR of its value, below its
            value with posterior probability ≥ level. ``"family"``: simultaneous
            bands for the values of ``population``'s rows × actions from the draws
            (max-rank; a ValueFamilySet; relaxed objective only). See
            :mod:`bayes_loco.bayes.credible` for what each guarantees.
        identified : bool
            Restrict the ellipsoids and the Mahalanobis distance to the
            directions the data identify (default; see
            :mod:`bayes_loco.bayes.credible`); False uses all k directions.
        population : Population, optional
            The population whose row × action values ``kind="family"`` bounds
            (that kind only).

        Returns
        -------
        EllipsoidSet, DrawsSet or QuantileSet
            As ``kind`` says; ``.level`` is ``level``.

        Raises
        ------
        ValueError
            An unknown kind, a bad level, or a fit with fewer than 2 draws.

        Examples
        --------
        >>> post.calibrated_set(0.9)
        EllipsoidSet(kind='credible', k=16, k_eff=8, radius=3.655, level=0.9)
        >>> post.calibrated_set(0.9, "cvar").kind
        'cvar'
        >>> policy = bl.pessimistic_policy(post.calibrated_set(0.9), pop, objective="exact")
        """
        kind = "credible" if kind is None else kind
        check_option(kind, "kind", self.calibrated_kinds)
        self._need_draws("calibrated_set")
        information = self.information() if kind == "sandwich" else None
        return credible_set(self.rtv_draws, self.basis, level, kind,
                            directions=self.directions if identified else None, information=information,
                            population=population)

    def information(self) -> np.ndarray:
        """Fisher information of θ_rtv at the posterior mean, Σ_t f_t w_t² p̄_t(1 − p̄_t) z_t z_tᵀ (k × k).

        The variance of the score under the model: a row with count f_t stands for f_t comparisons,
        and a sampling weight w_t scales its score (f_t = w_t = 1 where the data carry none).
        p̄_t uses the posterior mean Θ̄ itself, x_tᵀ Θ̄ Δφ_t, not its reduction
        (Θ̄ has a component outside the reduced subspace). Summed by
        :func:`bayes_loco.design.information`, as a Wald set's is, never forming the N × k design.

        Returns
        -------
        ndarray of shape (k, k)

        Examples
        --------
        >>> post.information().shape
        (16, 16)
        """
        data = self.data
        eta = margins(self.theta, data.contexts, data.delta)
        return information(self.basis, data, fisher_weights(eta, data.loss_weights * data.sample_weights))

    def _summary_table(self, level: float) -> pd.DataFrame:
        index = pd.Index(self.basis.labels(), name="coordinate")
        table = pd.DataFrame(np.nan, index=index, columns=list(SUMMARY_COLUMNS))
        table["estimate"] = self.estimate
        if self.rtv_draws.shape[0] < 2:  # one draw (map={"draws": 1}): nothing to summarise
            return table
        return _fill_draw_stats(table, self.tree, D.THETA_RTV, level)

    def _nu_row(self, level: float) -> pd.DataFrame:
        """Davidson's ν as a row of the summary: the posterior mean (MAP: the MAP) and its draws' statistics.

        A MAP fit's Laplace draws hold ν at the MAP, so its row has the estimate only.
        """
        row = pd.DataFrame(np.nan, index=pd.Index([D.NU], name="coordinate"), columns=list(SUMMARY_COLUMNS))
        row["estimate"] = self.nu
        if D.NU in self.tree[D.POSTERIOR].data_vars and self.rtv_draws.shape[0] >= 2:
            row = _fill_draw_stats(row, self.tree, D.NU, level)
        return row

    def _title_and_facts(self) -> tuple[str, dict]:
        d, post = self.diagnostics, self.tree["posterior"]
        if self.method == "nuts":
            return (f"Posterior (NUTS, {d.method.removeprefix('nuts-')})",
                    {"chains": post.sizes.get("chain", 1), "draws": post.sizes.get("draw", 1),
                     "parametrization": self.settings["nuts"].get("parametrization", FACTORED),
                     "divergences": d.divergences, "max R-hat": d.max_rhat, "min ESS bulk": d.min_ess_bulk,
                     # Where every draw reaches the depth, the trajectories were cut short: slow, not biased.
                     "leapfrog steps per draw": leapfrog_steps(self.tree) / post.sizes.get("chain", 1)
                     / post.sizes.get("draw", 1),
                     "draws at the maximum tree depth": d.max_depth_hits})
        if self.method == "vi":
            return (f"Posterior (VI, {d.method.removeprefix('vi-')})",
                    {"chains": 1, "draws": self.rtv_draws.shape[0],
                     "final loss": self.tree.attrs.get("final_loss")})
        return "Posterior (MAP, L-BFGS-B)", {"Laplace draws": self.rtv_draws.shape[0]}

    def _contrast_table(self, names: list[str], contrasts: np.ndarray, level: float) -> pd.DataFrame:
        """The rows of the differences ``contrasts`` (m × k) that the data identify, from the θ_rtv draws.

        A difference aᵀθ_rtv is identified when a lies in the span of ``directions``;
        its estimate is aᵀ``estimate``, its sd, interval, ESS and R-hat those of its draws.
        """
        inside = contrasts @ self.directions
        keep = np.sum(inside**2, axis=1) >= (1 - 1e-10) * np.sum(contrasts**2, axis=1)
        names, contrasts = [n for n, k in zip(names, keep, strict=True) if k], contrasts[keep]
        table = pd.DataFrame(np.nan, index=pd.Index(names, name="coordinate"), columns=list(SUMMARY_COLUMNS))
        table["estimate"] = contrasts @ self.estimate
        if self.rtv_draws.shape[0] < 2 or not names:
            return table
        draws = self.tree[D.POSTERIOR][D.THETA_RTV]
        values = xr.DataArray(np.asarray(draws.values, dtype=float) @ contrasts.T,
                              dims=("chain", "draw", "difference_row"),
                              coords={"chain": draws.coords["chain"].values,
                                      "draw": draws.coords["draw"].values})
        tree = xr.DataTree.from_dict({D.POSTERIOR: xr.Dataset({"difference": values})})
        return _fill_draw_stats(table, tree, "difference", level)

    def summary(self, level: float = LEVEL) -> Summary:
        """Posterior mean, sd and equal-tailed ``level`` interval of each identified θ_rtv coordinate (and ν).

        The table has one row per coordinate e_i of θ_rtv (labels of
        ``basis.labels()``) that the data identify (e_i in the span of
        ``directions``), with ArviZ's ESS and R-hat, and for Davidson's model a
        last row ``nu`` for ν (:mod:`.ties`); the header the data's
        dimensions, the interval, the fit's diagnostics and the sampler's facts
        (NUTS: chains and draws, and no iterations). A MAP fit's estimate is
        the MAP, its sd and interval those of its Laplace approximation; a note
        says so. Where only differences between features are identified
        (Δφ_t summing to 0, as in Bradley–Terry) the table adds them,
        ``"[c,j] − [c,0]"`` (:func:`~bayes_loco.summary_tables.feature_contrasts`), from
        the draws of θ_rtv.

        ``level`` defaults to 0.9, the level every set,
        prediction, summary and decision defaults to, while ``az.summary`` defaults to
        ``az.rcParams["stats.ci_prob"]`` (0.89 in ArviZ 1.x) and its
        ``ci_kind`` (equal-tailed, ``"eti"``): the header's ``interval`` says
        which level is printed; ``summary(level=az.rcParams["stats.ci_prob"])``
        gives ArviZ's own intervals, and ``az.summary(..., ci_prob=level)`` these.

        Parameters
        ----------
        level : float
            Level of the equal-tailed intervals, in (0, 1).

        Returns
        -------
        Summary
            Printed, a header and the table; ``.to_frame()`` gives the table as a DataFrame.

        Examples
        --------
        >>> table = post.summary(level=0.9).to_frame()
        >>> list(table.columns)
        ['estimate', 'std_err', 'lower', 'upper', 'ess_bulk', 'ess_tail', 'r_hat']
        >>> len(table)                     # the k_eff identified coordinates
        8
        """
        level = check_level(level)
        identified = self.identified
        table = self._summary_table(level)[identified]
        names, contrasts = feature_contrasts(self.basis, self.data, int(identified.sum()), self.k_eff)
        if names:
            table = pd.concat([table, self._contrast_table(names, contrasts, level)])
        if self.nu is not None:
            table = pd.concat([table, self._nu_row(level)])
        title, facts = self._title_and_facts()
        interval = interval_label(level, "equal-tailed")
        header = (data_header(self.data, self.basis, self.rank, self.k_eff, interval)
                  | diagnostics_header(self.diagnostics, None if self.method == "nuts" else "iterations")
                  | facts)
        notes = list(self.diagnostics.warnings)
        if self.method == "map":
            notes.append("MAP: the estimate is the MAP; sd and intervals are those of its Laplace "
                         "approximation (a Gaussian on the tangent space of the rank-r matrices at the "
                         "MAP), not of the posterior.")
            if self.nu is not None:
                notes.append("ν is held at its MAP in the Laplace draws: its row has no sd or interval.")
        elif self.method == "vi":
            notes.append("VI is a Gaussian approximation in (U, V): its intervals are typically too narrow. "
                         "Its draws are independent draws of one approximation (one chain: no R-hat).")
        notes += geometry_notes(self.settings) + plan_notes(self.settings)
        left_out = int((~identified).sum())
        reached = int((reached_coordinates(self.basis, self.data) & ~identified).sum()) if left_out else 0
        notes += unidentified_note(left_out, self.k, reached)
        notes += contrast_note(names)
        return Summary(title, header, table, tuple(notes))

    def save(self, path: str | os.PathLike, *, compress: bool = True, predictive: bool = True) -> Path:
        """Write this posterior to the netCDF-4 file ``path``; :func:`bayes_loco.load` reads it back.

        :func:`bayes_loco.save` of it: ``compress`` (default) deflates its arrays,
        losslessly; ``predictive=False`` leaves out ``posterior_predictive`` and
        ``preference_probability``, N × draws numbers each, the largest part of a
        posterior of many comparisons (a MAP posterior at N = 3,000: 35.4 MB plain,
        20.0 MB compressed, 9.3 MB compressed without them).

        Parameters
        ----------
        path : str or PathLike
        compress : bool
        predictive : bool

        Returns
        -------
        Path
            ``path``.

        Examples
        --------
        >>> saved = post.save("posterior.nc", predictive=False)
        >>> type(bl.load(saved)).__name__
        'Posterior'
        """
        return save_result(self, path, compress=compress, predictive=predictive)

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


def _model(data, rank, method, ties, prior, parametrization, chart_rank, start) -> pm.Model:
    if method == "nuts" and parametrization == CHART:
        prior = settings_group(prior, Prior, "prior")
        frame = chart_frame(data, start.theta, rank, prior.scale, chart_rank)
        return build_chart_model(data, rank, frame, prior=prior, ties=ties, group_rows=True)
    return build_model(data, rank, prior=prior, ties=ties, group_rows=True)


# What Posterior computes on first use and does not pickle.
_CACHED = ("model", "theta_draws", "rtv_draws")


def _interval_column(stats: pd.DataFrame, suffix: str) -> str:
    """The name of az.summary's interval bound column (``eti95_lb`` at level 0.95)."""
    found = [c for c in stats.columns if c.startswith("eti") and c.endswith(suffix)]
    if len(found) != 1:
        raise RuntimeError(f"az.summary has no single equal-tailed interval column ending in {suffix!r}: "
                           f"{list(stats.columns)}")
    return found[0]


def _fill_draw_stats(table: pd.DataFrame, tree: xr.DataTree, var: str, level: float) -> pd.DataFrame:
    """``table`` with az.summary's sd, equal-tailed ``level`` interval, ESS and R-hat of ``var``'s entries."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # R-hat of one chain (VI), few draws: NaN, reported as such
        stats = az.summary(tree, var_names=[var], ci_prob=level, ci_kind="eti", round_to="none")
    if len(stats) != len(table):
        raise RuntimeError(f"az.summary gave {len(stats)} rows for {var}, expected {len(table)}")
    table["std_err"] = stats["sd"].to_numpy(float)
    for column, suffix in (("lower", "_lb"), ("upper", "_ub")):
        table[column] = stats[_interval_column(stats, suffix)].to_numpy(float)
    for column in ("ess_bulk", "ess_tail", "r_hat"):
        table[column] = stats[column].to_numpy(float)
    return table
