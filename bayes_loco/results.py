"""One shape for every fit: the :class:`Fit` protocol, its :class:`Diagnostics` and its :class:`Summary`.

Both roads meet here. The MLE, the low-rank (FGD) fit, PRS and the posterior
(NUTS, MAP, VI) all expose

- ``theta``: the point estimate Θ̂ (d_x × d_φ; the posterior mean for a posterior);
- ``coordinates`` and ``estimate``: the coordinates the fit's sets live in, and θ̂ in them;
- ``penalty_set(c2)``: the paper's tuned penalty {θ : ‖θ − θ̂‖_W ≤ C₂·sqrt(k/N)}, W = Σ z zᵀ;
- ``calibrated_set(level, kind)``: a set with a nominal level (Wald for the frequentist
  fits; credible ellipsoid, sandwich, hull of draws or pointwise quantile for a posterior);
- ``diagnostics``: a :class:`Diagnostics`;
- ``summary(level)``: a :class:`Summary`, the statsmodels-like table of the
  identified coordinates with intervals.

so that code downstream (the policy solver, the study runner) never asks which
road produced a fit.
"""

from __future__ import annotations

import enum
import html
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
import pandas as pd
import xarray as xr

from ._validation import (
    LEVEL,
    as_float_array,
    check_finite,
    check_instance,
    check_int,
    check_level,
    check_option,
    check_real,
    check_shape,
)
from .config import get_config
from .coordinates import Coordinates, RTVBasis
from .data import PreferenceData
from .design import reached_coordinates
from .model import COV_TYPES, Likelihood, check_ties, resolve_cov_type, score_matrix, wald_precision
from .predict import Predictive
from .sets import EllipsoidSet, UncertaintySet, ValueFamilySet, value_family
from .summary_tables import (
    contrast_note,
    contrast_wald_table,
    coordinate_names,
    feature_contrasts,
    named_theta_table,
    unidentified_note,
    wald_table,
)
from .trees import fit_tree


class FitStatus(enum.Enum):
    """How a fit ended."""

    CONVERGED = "converged"
    NOT_CONVERGED = "not_converged"
    SEPARATED = "separated"
    SAMPLER_WARNINGS = "sampler_warnings"
    STOPPED = "stopped"  # a NUTS run stopped at its first divergence for the run that follows it


@dataclass(frozen=True)
class Diagnostics:
    """What a user asks of any fit before trusting it.

    Attributes
    ----------
    method : str
        The algorithm: ``"newton-cg"`` (MLE; ``"newton-exact"`` on item-indexed data),
        ``"fgd-lbfgs"``/``"fgd-alternating"`` (low rank), ``"prs"``,
        ``"nuts-pymc"``/``"nuts-nutpie"``/``"nuts-numpyro"``, ``"map"``, ``"vi-advi"``/``"vi-fullrank_advi"``.
    converged : bool
        The optimiser met its criterion, or the sampler raised no warning. ADVI has
        no criterion: for VI it only says the iterations ran (judge the fit by its
        loss, ``tree.attrs["final_loss"]``, and against NUTS).
    n_iter : int or None
        Iterations (optimisers and VI) or draws per chain (samplers).
    status : FitStatus
    message : str
        The optimiser's or sampler's own account.
    warnings : tuple of str
        The package warnings the fit issued (separation, non-convergence, sampler trouble).
    seconds : float
        Wall time of the fit (NaN where not measured).
    divergences, max_depth_hits : int or None
        NUTS only: divergent transitions after tuning, transitions at the maximum tree depth.
    mean_tree_depth : float or None
        NUTS only.
    max_rhat, min_ess_bulk, min_ess_tail : float
        Samplers only, over the identified quantities Θ and θ_rtv (NaN otherwise).
    """

    method: str
    converged: bool
    n_iter: int | None
    status: FitStatus
    message: str = ""
    warnings: tuple[str, ...] = ()
    seconds: float = np.nan
    divergences: int | None = None
    max_depth_hits: int | None = None
    mean_tree_depth: float | None = None
    max_rhat: float = np.nan
    min_ess_bulk: float = np.nan
    min_ess_tail: float = np.nan

    def __post_init__(self):
        check_instance(self.method, "method", str, "str")
        if not isinstance(self.converged, bool | np.bool_):
            raise TypeError(f"converged must be a bool, got {self.converged!r}")
        check_instance(self.status, "status", FitStatus)
        if self.n_iter is not None:
            check_int(self.n_iter, "n_iter", 0)

    @property
    def ess_per_second(self) -> float:
        """min bulk ESS over identified quantities per second of sampling (NaN for optimisers)."""
        return self.min_ess_bulk / self.seconds if self.seconds > 0 else np.nan


@runtime_checkable
class Fit(Protocol):
    """What every fit of either road offers (see the module docstring)."""

    @property
    def theta(self) -> np.ndarray: ...

    @property
    def coordinates(self) -> Coordinates: ...

    @property
    def estimate(self) -> np.ndarray: ...

    @property
    def diagnostics(self) -> Diagnostics: ...

    def penalty_set(self, c2: float = 5.0) -> EllipsoidSet: ...

    def calibrated_set(self, level: float = LEVEL, kind: str | None = None) -> UncertaintySet: ...

    def summary(self, level: float = LEVEL) -> Summary: ...


class SummaryHTML:
    """Jupyter shows a fit as the HTML of its ``summary()``."""

    def _repr_html_(self) -> str:
        return self.summary()._repr_html_()


class WaldFit(Predictive, SummaryHTML):
    """The calibrated set and the DataTree export that the frequentist fits share.

    A subclass provides ``estimate``, ``coordinates``, the fields ``ties`` and ``nu``, and
    ``_fitted()``: the data its estimate was fitted on, the margins η_t at the estimate
    and the map c ↦ Σ_t c_t z_t z_tᵀ in its coordinates.
    """

    calibrated_kinds = ("wald", "family")

    def _information(self, cov_type: str | None = None) -> np.ndarray:
        """The Wald set's precision at the estimate (:func:`~bayes_loco.model.wald_precision`).

        The Fisher information Σ_t p̂_t(1 − p̂_t) z_t z_tᵀ without ties and weights; with them
        under ``ties="half"`` the inverse of the sandwich covariance H⁻¹ J H⁻¹; under
        ``ties="davidson"`` the information of (θ, log ν) with ν profiled out. ``cov_type``
        (else the fit's own, else that default) picks ``"model"`` or ``"sandwich"``.
        """
        data, eta, gram = self._fitted()
        nu = self.nu
        # ν̂ = 0 (data without a tie) is the Bradley–Terry fit it was made as.
        likelihood = Likelihood.of(data, "half" if nu == 0 else self.ties)

        def score(g):
            return self.coordinates.to_coordinates(score_matrix(g, data.contexts, data.delta))

        cov_type = getattr(self, "cov_type", None) if cov_type is None else cov_type
        return wald_precision(likelihood, eta, None if not nu else float(np.log(nu)), gram, score, cov_type)

    @property
    def covariance(self) -> str:
        """The covariance the fit's Wald set uses: ``"model"`` (the information) or ``"sandwich"`` (HC0)."""
        data = self._fitted()[0] if not hasattr(self, "data") else self.data
        likelihood = Likelihood.of(data, "half" if self.nu == 0 else self.ties)
        return resolve_cov_type(likelihood, getattr(self, "cov_type", None))

    def _kept_information(self, cov_type: str | None) -> np.ndarray:
        """:meth:`_information`, computed once per ``cov_type`` where it is at most
        ``config["information_cache_bytes"]``, and handed out as a copy (the set factorises it in
        place). Above that (LLM width) every call computes its own: two k × k matrices would not fit."""
        kept = self.__dict__.setdefault("_information_kept", {})  # a frozen fit's cache, as cached_property's
        key = getattr(self, "cov_type", None) if cov_type is None else cov_type
        if key in kept:
            return kept[key].copy()
        information = self._information(cov_type)
        if information.nbytes > get_config()["information_cache_bytes"]:
            return information
        kept[key] = information
        return information.copy()

    def calibrated_set(self, level: float = LEVEL, kind: str | None = None, *,
                       cov_type: str | None = None, population=None) -> EllipsoidSet | ValueFamilySet:
        """Asymptotic Wald set: precision I at the estimate, radius² = χ²_k_eff(level).

        I is the Fisher information, or with ties or weights under ``ties="half"`` the inverse
        of the sandwich covariance, or under ``ties="davidson"`` the information with ν
        profiled out (:meth:`_information`). k_eff = rank I: directions no comparison reaches
        are not identified and the set is a cylinder along them. ``kind`` None means
        ``"wald"``. ``cov_type`` (``"model"`` or ``"sandwich"``) overrides the fit's covariance
        (:attr:`covariance`) for this set. ``kind="family"`` bounds instead only the row × action
        values of ``population``, all at once, with the same I (max-∣t∣ simultaneous intervals,
        :func:`~bayes_loco.sets.value_family`; relaxed objective only).
        From ``config["factored_min"]`` coordinates on the set holds I's Cholesky factor
        and not I (its ``precision`` is None; :meth:`EllipsoidSet.factored`).

        Parameters
        ----------
        level : float
            Level in (0, 1).
        kind : {"wald"} or None
            The only kind (None means it).
        cov_type : {"model", "sandwich"}, optional
            Overrides the fit's covariance for this set.

        Returns
        -------
        EllipsoidSet
            ``kind="wald"`` in the fit's coordinates; ``.level`` is ``level``.

        Examples
        --------
        >>> fit.calibrated_set(0.9)
        EllipsoidSet(kind='wald', k=16, k_eff=8, radius=3.655, level=0.9)
        >>> fit.calibrated_set(0.9, cov_type="sandwich").level
        0.9
        """
        level = check_level(level)
        kind = check_option("wald" if kind is None else kind, "kind", self.calibrated_kinds)
        if (population is None) == (kind == "family"):
            raise ValueError("kind='family' needs the population whose row x action values it bounds "
                             "(population=...)" if kind == "family" else
                             "population applies to kind='family' only")
        if cov_type is not None:
            check_option(cov_type, "cov_type", COV_TYPES)
        wald = EllipsoidSet.wald(self.estimate, self._kept_information(cov_type), level, self.coordinates,
                                 overwrite=True)
        return wald if kind == "wald" else value_family(wald, population, level)

    def to_datatree(self, *, chains: int = 4, draws: int = 1000, seed: int = 0) -> xr.DataTree:
        """This fit as an ArviZ DataTree: Wald draws N(θ̂, I⁺) in ``posterior``, θ̂ in ``point_estimate``.

        The layout of a posterior's tree (:func:`bayes_loco.trees.fit_tree`), so
        one ArviZ plot shows both roads, e.g. ``az.plot_forest({"NUTS":
        post.tree, "Wald": fit.to_datatree()}, var_names=["theta_rtv"], combined=True)``
        (``var_names=["theta"]`` for the MLE, whose coordinates are vec(Θ)).

        Parameters
        ----------
        chains, draws : int
            How many Wald draws, as ``chains`` × ``draws``.
        seed : int
            Seed of the draws.

        Returns
        -------
        xarray.DataTree
            ``posterior`` (the draws), ``point_estimate`` (the estimate) and ``constant_data``.

        Examples
        --------
        >>> tree = fit.to_datatree(chains=2, draws=100)
        >>> sorted(tree.children)
        ['constant_data', 'point_estimate', 'posterior']
        >>> dict(tree["posterior"].sizes)
        {'chain': 2, 'draw': 100, 'rtv_coord': 16}
        """
        return fit_tree(self, chains=chains, draws=draws, seed=seed)


def check_fit_theta(theta, name: str, data: PreferenceData) -> np.ndarray:
    """A fit's Θ̂ (d_x × d_φ of ``data``, finite), or one error naming ``name``."""
    theta = as_float_array(theta, name, 2)
    return check_shape(theta, name, (data.d_x, data.d_phi), " (d_x, d_phi) of its data")


def check_fit_ties(fit) -> None:
    """A fit's ``ties`` (one of TIE_MODELS) and ``nu`` (None for "half", ν ≥ 0 for "davidson"), or error."""
    ties = check_ties(fit.ties)
    if ties == "half" and fit.nu is not None:
        raise ValueError(f"nu is Davidson's tie parameter: a fit with ties='half' has nu None, got "
                         f"{fit.nu!r}")
    if ties == "davidson":
        if fit.nu is None:
            raise ValueError("a fit with ties='davidson' needs its ν̂ (nu >= 0), got None")
        object.__setattr__(fit, "nu", check_real(fit.nu, "nu", 0.0))


# How a summary's header names each covariance type.
COVARIANCE_LABELS = {"model": "model (information)", "sandwich": "sandwich (HC0)"}


def tie_header(fit, data: PreferenceData) -> dict:
    """How a fit read ties, its counts and weights, and the covariance of its intervals, for its summary."""
    header = {} if fit.ties == "half" else {"ties": fit.ties, "nu": fit.nu}
    likelihood = Likelihood.of(data, "half" if fit.nu == 0 else fit.ties)
    if likelihood.quasi:
        header = {"ties": fit.ties} | header
    if data.counts is not None:
        header |= {"rows": data.n}
    if data.weights is not None:
        header |= {"weights": "sampling"}
    cov_type = resolve_cov_type(likelihood, getattr(fit, "cov_type", None))
    return header | {"covariance": COVARIANCE_LABELS[cov_type]}


def check_fit_common(fit, data_field: str = "data") -> PreferenceData:
    """The fields every frequentist fit has: its data, ``nll`` and ``diagnostics``; returns the data."""
    data = check_instance(getattr(fit, data_field), data_field, PreferenceData)
    nll = check_finite(fit.nll, "nll")
    if nll < 0:
        raise ValueError(f"nll (a negative log-likelihood) must be >= 0, got {nll}")
    check_instance(fit.diagnostics, "diagnostics", Diagnostics)
    return data


class InRTVCoordinates:
    """The members of a fit whose estimate and sets live in the RTV coordinates of its ``basis``."""

    basis: RTVBasis

    @property
    def rank(self) -> int:
        return self.basis.rank

    @property
    def k(self) -> int:
        """k = (d_x + d_φ) r − r², the number of RTV coordinates."""
        return self.basis.dim

    @property
    def coordinates(self) -> RTVBasis:
        return self.basis


@dataclass(frozen=True)
class Summary:
    """A fit's summary: a header of facts, a table of estimates with intervals, and notes.

    ``str(summary)`` prints it as statsmodels does; in Jupyter it renders as HTML;
    :meth:`to_frame` gives the whole table (the printed one stops at ``max_rows``).

    The printed table has one fixed number of decimals for ``estimate``,
    ``std_err``, ``lower`` and ``upper`` together (:func:`table_decimals`: four
    significant digits of the largest, two of the smallest standard error), so a
    round-off zero such as 1e-16 prints as 0 at that precision; ESS prints as
    whole numbers and R-hat with three decimals. :meth:`to_frame` keeps the
    numbers unrounded.

    Attributes
    ----------
    title : str
    header : dict
        N, d_x, d_φ, rank, k, k_eff, the interval (its level and kind), method,
        converged, and fit-specific facts.
    table : pandas.DataFrame
        One row per identified coordinate: ``estimate``, ``std_err``, ``lower``,
        ``upper`` and, for posteriors, ``ess_bulk``, ``ess_tail``, ``r_hat``;
        where only differences between features are identified, rows
        ``"[c,j] − [c,0]"`` for them (:func:`feature_contrasts`).
    notes : tuple of str
        Separation, ill-conditioning, unidentified coordinates, sampler trouble.
    max_rows : int
        Rows of the table that ``str`` prints.
    """

    title: str
    header: Mapping[str, object]
    table: pd.DataFrame = field(repr=False)
    notes: tuple[str, ...] = ()
    max_rows: int = 20

    def to_frame(self) -> pd.DataFrame:
        """The whole table, unrounded (a copy: changing it leaves the summary as it was).

        Returns
        -------
        pandas.DataFrame
            Indexed by ``coordinate``: ``estimate``, ``std_err``, ``lower``, ``upper`` (and, for
            posteriors, ``ess_bulk``, ``ess_tail``, ``r_hat``).

        Examples
        --------
        >>> table = fit.summary().to_frame()
        >>> table.index.name, list(table.columns)
        ('coordinate', ['estimate', 'std_err', 'lower', 'upper'])
        """
        return self.table.copy()

    def _header_lines(self, width: int) -> list[str]:
        cells = [f"{k + ':':<16}{_format(v):>20}" for k, v in self.header.items()]
        half = (len(cells) + 1) // 2
        left, right = cells[:half], cells[half:] + [""] * (2 * half - len(cells))
        return [f"{a:<{width // 2}}{b}".rstrip() for a, b in zip(left, right, strict=True)]

    def _formatters(self) -> dict:
        """How each column of the printed table writes its numbers (see the class docstring)."""
        decimals = table_decimals(self.table)
        formats = {column: _fixed(decimals) for column in VALUE_COLUMNS}
        formats |= {"ess_bulk": _fixed(0), "ess_tail": _fixed(0), "r_hat": _fixed(3)}
        return {column: formats.get(column, _general) for column in self.table.columns}

    def __str__(self) -> str:
        shown = self.table.head(self.max_rows)
        if len(shown):
            body = shown.to_string(formatters=self._formatters())
        else:
            body = "(no coordinate or difference of coordinates is identified)"
        width = max(78, max(len(line) for line in body.splitlines()))
        lines = [self.title.center(width), "=" * width, *self._header_lines(width), "=" * width, body]
        if len(self.table) > len(shown):
            lines.append(f"... {len(self.table) - len(shown)} more rows: summary.to_frame() has them all")
        lines.append("=" * width)
        lines += [textwrap.fill(f"[{i}] {note}", width, subsequent_indent="    ")
                  for i, note in enumerate(self.notes, 1)]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        head = "".join(f"<tr><th style='text-align:left'>{html.escape(str(k))}</th>"
                       f"<td>{html.escape(_format(v))}</td></tr>" for k, v in self.header.items())
        table = self.table.head(self.max_rows).to_html(formatters=self._formatters())
        more = (f"<p>… {len(self.table) - self.max_rows} more rows: <code>summary.to_frame()</code></p>"
                if len(self.table) > self.max_rows else "")
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in self.notes)
        return (f"<div><h4>{html.escape(self.title)}</h4><table>{head}</table>{table}{more}"
                f"{f'<ol>{notes}</ol>' if notes else ''}</div>")


# The columns a summary prints with one shared number of decimals: they are in the same units.
VALUE_COLUMNS = ("estimate", "std_err", "lower", "upper")


def table_decimals(table: pd.DataFrame) -> int:
    """The decimals a summary prints its value columns with (shared by ``estimate``, ``std_err``, …).

    Enough for ``config["significant"]`` significant digits of the largest absolute
    value and ``config["se_significant"]`` of the smallest standard error, at most
    ``config["max_decimals"]``; a value smaller than half a unit of the last decimal
    (a round-off zero) prints as 0.
    """
    columns = [c for c in VALUE_COLUMNS if c in table.columns]
    values = np.abs(table[columns].to_numpy(float)).ravel()
    values = values[np.isfinite(values) & (values > 0)]
    if not values.size:
        return get_config()["significant"]
    decimals = get_config()["significant"] - 1 - int(np.floor(np.log10(values.max())))
    if "std_err" in table.columns:
        se = table["std_err"].to_numpy(float)
        se = se[np.isfinite(se) & (se > 0)]
        if se.size:
            decimals = max(decimals, get_config()["se_significant"] - 1 - int(np.floor(np.log10(se.min()))))
    return int(np.clip(decimals, 0, get_config()["max_decimals"]))


def _fixed(decimals: int):
    def write(value) -> str:
        if not np.isfinite(value):
            return "nan" if np.isnan(value) else str(value)
        rounded = round(float(value), decimals)
        return f"{rounded + 0.0 if rounded else 0.0:.{decimals}f}"  # never "-0.000"
    return write


def _general(value) -> str:
    return f"{value:.4g}" if isinstance(value, float | np.floating) else str(value)


def _format(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return "nan" if np.isnan(value) else f"{value:.5g}"
    if isinstance(value, enum.Enum):
        return str(value.value)
    return str(value)


def data_header(data: PreferenceData, coordinates: Coordinates, rank, k_eff,
                interval: str | None = None) -> dict:
    """The header every summary starts with: N, d_x, d_φ, rank, k, k_eff and the interval it prints."""
    n = data.n if data.counts is None else int(data.n_comparisons)
    header = {"N": n, "d_x": data.d_x, "d_phi": data.d_phi, "rank": rank, "k": coordinates.dim,
              "k_eff": k_eff}
    return header | ({"interval": interval} if interval else {})


def interval_label(level: float, kind: str) -> str:
    """The header's ``interval``: its level and kind, e.g. ``"95% Wald"``."""
    return f"{100 * level:.4g}% {kind}"


def diagnostics_header(diagnostics: Diagnostics, iterations: str | None = "iterations") -> dict:
    """Method and convergence of a fit, and its iterations under the key ``iterations``, for its header.

    ``iterations`` None (a sampler, whose draws the header gives already) leaves them out; so
    does an ``n_iter`` of None. A fit that converged in 0 iterations says its start met the criterion.
    """
    header = {"method": diagnostics.method, "converged": diagnostics.converged, "status": diagnostics.status}
    n_iter = diagnostics.n_iter
    if iterations is not None and n_iter is not None:
        header[iterations] = "0 (start optimal)" if n_iter == 0 and diagnostics.converged else n_iter
    return header


def wald_summary(title: str, fit, data: PreferenceData, level: float, extra: Mapping[str, object],
                 notes: tuple[str, ...] = (), iterations: str = "iterations") -> Summary:
    """A frequentist fit's summary: estimates with ``level`` Wald intervals on the identified coordinates.

    Standard errors come from the Fisher information of ``fit.calibrated_set`` (the
    Wald set); a fit too large for it (the MLE baselines above 2 GiB) gets
    estimates only and a note. Where only differences between features are
    identified (:func:`feature_contrasts`), the table adds them, with their Wald
    intervals. ``iterations``: the header's name for the fit's iterations.
    """
    level = check_level(level)
    coordinates, estimate = fit.coordinates, fit.estimate
    labels = coordinate_names(coordinates, data)
    facts = diagnostics_header(fit.diagnostics, iterations) | dict(extra)
    try:
        wald = fit.calibrated_set(level)
    except MemoryError as exc:
        table = pd.DataFrame({"estimate": estimate}, index=pd.Index(labels, name="coordinate"))
        header = data_header(data, coordinates, getattr(fit, "rank", None), None)
        return Summary(title, header | facts, table,
                       (*fit.diagnostics.warnings, *notes, f"no intervals: {exc}"))
    table, left_out = wald_table(estimate, wald, labels, level)
    header = data_header(data, coordinates, getattr(fit, "rank", None), wald.effective_dim,
                         interval_label(level, "Wald"))
    extra_notes, notes = notes, fit.diagnostics.warnings
    if left_out:
        identified = np.isin(labels, table.index)
        reached = int((reached_coordinates(coordinates, data) & ~identified).sum())
        names, contrasts = feature_contrasts(coordinates, data, len(table), wald.effective_dim)
        if names:
            table = pd.concat([table, contrast_wald_table(estimate, wald, contrasts, names, level)])
        notes += (*unidentified_note(left_out, coordinates.dim, reached), *contrast_note(names))
    if isinstance(coordinates, RTVBasis):
        named = named_theta_table(fit, data, wald, level)
        named = named[~named.index.isin(table.index)] if len(named) else named
        if len(named):
            table = pd.concat([table, named])
            notes += ("Rows named by the data's contexts and features are entries of Θ̂ = Û Θ' V̂ᵀ (linear in "
                      "the RTV coordinates above), with their Wald intervals.",)
    notes += tuple(extra_notes)
    if wald.condition_number > get_config()["ill_conditioned"]:
        notes += (f"The Fisher information is ill-conditioned (condition number {wald.condition_number:.2g} "
                  "on the identified directions): some standard errors are unreliable.",)
    return Summary(title, header | facts, table, notes)
