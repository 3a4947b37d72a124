"""The settings groups of the Bayesian road, and how every settings group is read.

:func:`~bayes_loco.bayes.fit_posterior` takes its settings in groups, each a frozen
dataclass that also accepts a dict of its fields (:func:`settings_group`):
:class:`Prior`, :class:`NUTS`, :class:`MAP` and :class:`VI`. They live here, at the
bottom of the Bayesian road, so that the model builders (:mod:`.model`,
:mod:`.chart`), the samplers and the :class:`~.posterior.Posterior` read them
without importing the fit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from .._validation import check_int, check_option, check_real

METHODS = ("nuts", "map", "vi")
NUTS_SAMPLERS = ("pymc", "nutpie", "numpyro")
NUTPIE_BACKENDS = ("numba", "jax")
VI_METHODS = ("advi", "fullrank_advi")
# The coordinates NUTS moves in (``nuts.parametrization``; :mod:`.chart`, :mod:`.geometry`).
AUTO = "auto"
CHART = "chart"
FACTORED = "factored"
PARAMETRIZATIONS = (AUTO, CHART, FACTORED)


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
    nu_scale : float or None
        σ_ν > 0 of the prior of Davidson's tie parameter, log ν ~ N(0, σ_ν²)
        (:mod:`bayes_loco.bayes.ties`); used only with ``ties="davidson"``, which
        sets it to ``config["nu_scale"]`` when it is None (the model is chosen by
        ``ties``, never by this prior; with ``ties="half"`` it is refused).
    """

    scale: float = 1.0
    hyper: bool = False
    balance: float = 0.0
    nu_scale: float | None = None

    def __post_init__(self):
        _set(self, "scale", check_real(self.scale, "prior.scale", 0.0, low_open=True))
        if not isinstance(self.hyper, bool):
            raise TypeError(f"prior.hyper must be a bool, got {self.hyper!r}")
        _set(self, "balance", check_real(self.balance, "prior.balance", 0.0))
        if self.nu_scale is not None:
            _set(self, "nu_scale", check_real(self.nu_scale, "prior.nu_scale", 0.0, low_open=True))


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


def prior_record(prior: Prior) -> dict:
    """The prior as a fit's settings record it: its fields, without ``nu_scale`` when there is no ν.

    A fit without a tie parameter records exactly the fields it recorded before ν
    existed, so its settings (and the files that store them) are unchanged.
    """
    record = dataclasses.asdict(prior)
    if prior.nu_scale is None:
        del record["nu_scale"]
    return record


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
        its chains vectorized when there are fewer devices than chains; its
        own step-size and mass-matrix adaptation takes 1.9–2.6× nutpie's
        leapfrog steps per draw on the same chart (docs/results/posterior.md, "On a
        GPU"), so a GPU is used through nutpie's ``backend="jax"`` instead.
    backend : {"numba", "jax"} or None
        Where nutpie evaluates the log density and its gradient: compiled by
        numba on the CPU, or jitted by JAX on JAX's default device (the extra
        ``jax``), with nutpie's own adaptation either way. None (default):
        ``"jax"`` where JAX is installed and sees a GPU, else ``"numba"``.
        Only for nutpie.
    target_accept : float
        Target acceptance in (0, 1).
    init_jitter : float
        Relative jitter (times the root-mean-square factor entry) of the starts:
        one per chain for PyMC's sampler, one shared start for nutpie and
        numpyro (which take a single initial point).
    rhat_max, ess_min : float
        A :class:`~bayes_loco.SamplerWarning` is issued when R-hat of some entry
        of Θ or θ_rtv (or Davidson's ν) exceeds ``rhat_max``, its bulk or tail
        ESS is below ``ess_min``, or any transition diverged.
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
        components the data determine at the start (column space and distance
        from 0, :attr:`~bayes_loco.bayes.chart.ChartFrame.chartable_rank`), the
        factored model where there are none; the fit's settings record what
        ran. docs/results/posterior.md measures them.
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
    plan : sequence of dict or None
        Your own plan instead of the automatic one: the NUTS runs to make, in order, until
        one neither diverges nor misses ``rhat_max``; each a dict of some of
        ``parametrization``, ``chart_rank``, ``target_accept``, ``draws`` and ``tune``
        (the rest from these settings), e.g. ``[{"parametrization": "chart"},
        {"parametrization": "factored", "target_accept": 0.95}]``. No automatic fall-back
        follows it; the best run is kept as in the automatic plan, and
        ``post.settings["plan"]`` records each. None (default): the automatic plan of
        :mod:`bayes_loco.bayes.geometry` (its thresholds are settings of
        :func:`bayes_loco.set_config`).
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
    backend: str | None = None
    plan: tuple[dict, ...] | None = None

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
        if self.backend is not None:
            check_option(self.backend, "nuts.backend", NUTPIE_BACKENDS)
            if self.sampler not in (None, "nutpie"):
                raise ValueError(f"nuts.backend is nutpie's; got backend={self.backend!r} with "
                                 f"sampler={self.sampler!r}")
        if self.plan is not None:
            _set(self, "plan", _checked_plan(self))

    def attempt(self, entry: dict) -> NUTS:
        """These settings with one entry of a plan (its coordinates, target and length) in place.

        Parameters
        ----------
        entry : dict
            Some of ``parametrization``, ``chart_rank``, ``target_accept``, ``draws``, ``tune``.

        Returns
        -------
        NUTS
            A new settings object without a plan; ``self`` is unchanged.

        Examples
        --------
        >>> ran = bl.bayes.NUTS(draws=500).attempt({"parametrization": "factored", "target_accept": 0.95})
        >>> ran.parametrization, ran.target_accept, ran.draws, ran.plan
        ('factored', 0.95, 500, None)
        """
        fields = {"plan": None, **entry}
        if fields.get("parametrization") == FACTORED:
            fields.setdefault("chart_rank", None)  # the factored model has no chart rank
        return dataclasses.replace(self, **fields)


#: What one entry of ``NUTS.plan`` may set.
PLAN_FIELDS = ("parametrization", "chart_rank", "target_accept", "draws", "tune")


def _checked_plan(nuts: NUTS) -> tuple[dict, ...]:
    """``nuts.plan`` as a tuple of dicts, each checked as the settings it makes, or an error naming it."""
    plan = nuts.plan
    if isinstance(plan, (str, bytes, dict)) or not hasattr(plan, "__iter__"):
        raise TypeError(f"nuts.plan must be a list of dicts, got {type(plan).__name__}")
    plan = tuple(plan)
    if not plan:
        raise ValueError("nuts.plan is empty: give at least one attempt, or None for the automatic plan")
    checked = []
    for i, entry in enumerate(plan):
        if not isinstance(entry, dict):
            raise TypeError(f"nuts.plan[{i}] must be a dict, got {type(entry).__name__}")
        unknown = sorted(set(entry) - set(PLAN_FIELDS))
        if unknown:
            raise ValueError(f"nuts.plan[{i}] has no setting {unknown[0]!r}; an attempt sets some of "
                             f"{', '.join(PLAN_FIELDS)}")
        try:
            made = nuts.attempt(entry)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"nuts.plan[{i}]: {exc}") from None
        checked.append({field: getattr(made, field) for field in PLAN_FIELDS if field in entry})
    return tuple(checked)


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
        :func:`~bayes_loco.bayes.fit_posterior`).
    """

    draws: int = 1000

    def __post_init__(self):
        _set(self, "draws", check_int(self.draws, "map.draws", 1))

