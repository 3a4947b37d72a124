"""How each method of :func:`~bayes_loco.bayes.fit_posterior` draws: NUTS (PyMC, nutpie, numpyro) and ADVI.

:func:`sample_nuts` runs NUTS from the starts it is given (one per chain for PyMC's
sampler, one shared otherwise), :func:`fit_vi` ADVI from the frequentist start; the
MAP and its Laplace approximation are in :mod:`.laplace`.

**nutpie, compiled once per model shape.**

``pm.sample(nuts_sampler="nutpie")`` compiles the model's log density and gradient
with numba on every call: 12.6 s of the 80 s a default fit took at N = 10,000, paid
again by every seed of a study and every re-run of a notebook cell. The models of
this package take everything that varies between data sets of one shape as shared
inputs (the data containers, and the chart's frame: :func:`~.chart.frame_inputs`), so
one compiled model serves them all: :func:`sample_nutpie` keeps the last
``config["cache_size"]`` compiled models, keyed by the caller's description of the model's
structure (``key``: parametrisation, ranks, dimensions, N, prior), and on a hit swaps
in the new inputs (``CompiledPyMCModel.with_data``) and the new start.

A cached model draws exactly what a fresh compilation would: the seeds are derived
as ``pm.sample`` derives them, and ``tests/test_bayes_samplers.py`` checks the draws of
a second fit against a fit compiled anew.

**The draws only, compiled.** nutpie compiles two functions: the log density with its
gradient, and the "expand" function that turns each draw into the stored variables. The
model's Deterministics (U, V, Θ; the chart's whole change of variables again) in the
second took a quarter of the chart's compile time (§5.1 r = 1, N = 3,000, 20 × 10 × 20:
about 50 s with them against 36 s without, on a loaded 2-core machine), so only the free
variables are compiled into it (``var_names``) and the Deterministics are computed from the
draws afterwards by :func:`pymc.compute_deterministics`, in about a second.

**nutpie over JAX.** With ``NUTS.backend="jax"`` (the default where JAX sees a GPU)
nutpie's sampler, and so its adaptation, calls a log density and gradient jitted
by JAX on JAX's default device instead of numba's; numpyro's own adaptation took
about twice nutpie's leapfrog steps per draw on the same chart (docs/design.md,
"Samplers"). The same cache serves it, with the data kept as inputs.

**Same seed, same draws, cold cache or warm.** PyTensor compiles a model's log density with
numba, by default with fastmath flags that let LLVM reassociate floating-point sums; and it
caches the compiled pieces on disk. A function compiled fresh and the same function assembled
from cached pieces are then optimised differently, so their gradients differ in the last bits,
and NUTS, a chaotic map, turns that into other draws: with a fixed ``random_seed`` the first
fit on a machine (empty compile cache) drew other draws than every later one, with PyMC's
sampler and with nutpie's. Every model this package samples, optimises or draws from is
compiled under :func:`exact_arithmetic` (fastmath off: IEEE arithmetic in the written order),
which makes a fixed seed draw bit-identical draws with a cold or a warm cache; the gradient's
cost did not change measurably (its time is in the two GEMMs, not in the elementwise code).
``tests/test_reproducible.py`` checks this in fresh processes with empty cache directories.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import logging
import os
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Hashable

import numpy as np
import nutpie
import pymc as pm
import pytensor
import xarray as xr
from pymc.backends.arviz import patch_nutpie_idata
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.traversal import graph_inputs
from threadpoolctl import threadpool_limits

from ..config import get_config
from . import dims as D
from .settings import NUTS, VI, Prior
from .watch import Watch, sample_watched

# (the whole model, a function adding the free variables the sampled model leaves out): :func:`sample_nuts`.
Completion = tuple[pm.Model, Callable[[xr.Dataset], xr.Dataset]]
_CACHE: OrderedDict[Hashable, object] = OrderedDict()
# The PyMC loggers silenced when progressbar=False ("Finished [100%]", "Sequential sampling", ...).
_PYMC_LOGGERS = ("pymc", "pymc.sampling.mcmc", "pymc.stats.convergence", "pymc.variational.inference",
                 "pymc.tuning.starting")


def exact_arithmetic():
    """A context in which PyTensor compiles numba code in IEEE arithmetic (``numba__fastmath=False``).

    Needed for a fixed seed to give the same draws whether the compile cache is cold or warm (the
    module docstring). PyTensor's numba cache keys carry the flag, so code compiled here never reuses
    a piece compiled with fastmath on, and the user's own setting is back in force on leaving it. A
    context, not a decorator: a decorator's frame would move the user's call out of the reach of the
    warnings' ``stacklevel``.
    """
    return pytensor.config.change_flags(numba__fastmath=False)


def clear_cache() -> None:
    """Forget every compiled model (the next fit of each shape compiles again)."""
    _CACHE.clear()


def _is_numba(compiled) -> bool:
    """Whether ``compiled`` is nutpie's numba model (CompiledPyMCModel), not its JAX one (PyFuncModel)."""
    return hasattr(compiled, "shared_var_keys")


def _shared_names(compiled) -> list[str]:
    """The names of a compiled model's shared inputs."""
    if _is_numba(compiled):
        return [var.name for var in compiled.shared_var_keys]
    return list(compiled._shared_data)


def _shared_inputs(model: pm.Model, compiled) -> dict[str, np.ndarray] | None:
    """The new model's values of the compiled model's shared inputs, by name; None if one is missing.

    The data containers are the model's data variables; the chart's frame inputs
    are found among the inputs of its Deterministics (U and V read every one), which
    is cheaper than building the log density's graph.
    """
    named = {var.name: var for var in model.data_vars}
    named |= {var.name: var for var in graph_inputs(model.deterministics) if isinstance(var, SharedVariable)}
    values = {}
    for name in _shared_names(compiled):
        if name not in named:
            return None
        values[name] = named[name].get_value(borrow=True)
    return values


def _initial_point(model: pm.Model, start: dict, compiled):
    """The flat initial point nutpie calls for, at ``start`` on ``model``, or None if it cannot be spliced.

    The cached model's own function gives the point of its first start; the
    variables ``start`` names are replaced in it (they are untransformed, so their
    values are the point's). Compiling PyMC's initial point function again would
    cost about a second.
    """
    if _is_numba(compiled):  # numba's model keeps PyMC's initial point function, JAX's its own
        shapes, previous = compiled.shapes, compiled.initial_point_func
    else:  # nutpie 0.16's PyFuncModel.shapes reads an attribute its variables lack
        shapes = {var.name: tuple(var.shape) for var in compiled._variables}
        previous = compiled._make_initial_points
    layout, offset = {}, 0
    for rv in model.free_RVs:
        name = model.rvs_to_values[rv].name
        size = int(np.prod(shapes[name], dtype=int))
        layout[name] = (slice(offset, offset + size), rv)
        offset += size
    for name, value in start.items():
        if name not in layout or model.rvs_to_transforms.get(layout[name][1]) is not None:
            return None
        if np.size(value) != layout[name][0].stop - layout[name][0].start:
            return None

    def flat(seed=None):
        point = np.array(previous(seed), dtype=np.float64)
        for name, value in start.items():
            point[layout[name][0]] = np.asarray(value, dtype=np.float64).reshape(-1)
        return point

    return flat


def _with_inputs(compiled, inputs: dict, initial):
    """``compiled`` with new shared inputs and initial point function (numba's or JAX's model)."""
    if _is_numba(compiled):
        return dataclasses.replace(compiled.with_data(**inputs), initial_point_func=initial)
    import jax.numpy as jnp

    # On the device once, not copied there at every gradient.
    moved = compiled.with_data(**{name: jnp.asarray(value) for name, value in inputs.items()})
    return dataclasses.replace(moved, _make_initial_points=initial)


def compiled_model(model: pm.Model, key: Hashable, start: dict, backend: str = "numba"
                   ) -> tuple[object, float, bool]:
    """nutpie's compiled ``model`` started at ``start``: (compiled, seconds spent, reused).

    A model cached under ``key`` and ``backend`` is reused with ``model``'s shared
    inputs and start; otherwise the model is compiled (``backend`` "numba": the log
    density and gradient by numba for the CPU; "jax": jitted by JAX, gradient by
    JAX, on JAX's default device) and cached.
    """
    t0 = time.perf_counter()
    key = (key, backend)
    cached = _CACHE.get(key)
    if cached is not None:
        inputs = _shared_inputs(model, cached)
        initial = None if inputs is None else _initial_point(model, start, cached)
        if initial is not None:
            _CACHE.move_to_end(key)
            return _with_inputs(cached, inputs, initial), time.perf_counter() - t0, True
    options = {"backend": backend}
    if backend == "jax":
        jax = _import_jax()
        # PyTensor's graph is float64; JAX would run it in float32 (PyMC's own JAX samplers set this too).
        jax.config.update("jax_enable_x64", True)
        # nutpie would freeze the data into the JAX graph as constants: a second data set could not reuse it.
        options |= {"gradient_backend": "jax", "freeze_model": False}
    compiled = nutpie.compile_pymc_model(model, initial_points=start, jitter_rvs=set(),
                                         var_names=[var.name for var in model.free_RVs], **options)
    _CACHE[key] = compiled
    while len(_CACHE) > get_config()["cache_size"]:
        _CACHE.popitem(last=False)
    return compiled, time.perf_counter() - t0, False


def sample_nutpie(model: pm.Model, key: Hashable, start: dict, *, draws: int, tune: int, chains: int,
                  cores: int, seed: int, target_accept: float, progressbar: bool,
                  backend: str = "numba", watch: Watch | None = None,
                  complete: Completion | None = None) -> xr.DataTree:
    """nutpie's NUTS on ``model`` from ``start``, compiled once per ``key`` (see the module docstring).

    The tree is ``pm.sample``'s: the same groups, the same seeds for the same
    ``seed``; its posterior's attrs add ``compile_time`` (seconds) and
    ``compiled_model_reused``. With ``watch`` the run is watched (:func:`~.watch.sample_watched`):
    :class:`~.watch.DeepWarmup` where a warm-up of at least the last of ``config["watch_draws"]``
    draws trees as deep as ``watch`` says (:meth:`~.watch.Watch.why`); with its ``divergence`` set,
    :class:`~.watch.Diverged` at the first divergent draw after the warm-up. ``complete``: as in
    :func:`sample_nuts`.
    """
    with exact_arithmetic():
        compiled, compile_seconds, reused = compiled_model(model, key, start, backend)
        # pm.sample's derivation of the sampler's seed, so that a fit draws what it drew through pm.sample.
        seeds = [int(rng.integers(2**30)) for rng in np.random.default_rng(seed).spawn(chains)]
        t0 = time.time()
        options = dict(draws=draws, tune=max(tune, 1), chains=chains, cores=cores, seed=seeds[0],
                       store_unconstrained=False, progress_bar=progressbar, target_accept=target_accept)
        if watch is not None:
            tree = sample_watched(compiled, watch, **options)
        else:
            tree = nutpie.sample(compiled, save_warmup=False, **options)
        sampling_time = time.time() - t0
        tree["posterior"] = xr.DataTree(with_deterministics(tree["posterior"].to_dataset(), model, complete))
    patch_nutpie_idata(tree, model, sampling_time=sampling_time)
    tree["posterior"].attrs["compile_time"] = compile_seconds
    tree["posterior"].attrs["compiled_model_reused"] = int(reused)
    return tree


# ------------------------------------------------------------------------------ NUTS and ADVI


def available_samplers() -> tuple[str, ...]:
    """The NUTS implementations installed here: always ``"pymc"``, then nutpie and numpyro if present.

    nutpie, a dependency, is the default (``nuts={"sampler": ...}`` chooses).

    Returns
    -------
    tuple of str

    Examples
    --------
    >>> "pymc" in bl.bayes.available_samplers()
    True
    """
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
    return "parallel" if _import_jax().local_device_count() >= chains else "vectorized"


def _import_jax():
    """JAX, set not to take most of the GPU's memory when its backend starts, unless the user said so.

    A study's worker processes each start JAX; with JAX's default each takes 75 % of
    the GPU's memory and the second one fails. Each model here needs a few MB.
    """
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax

    return jax


def jax_accelerator() -> bool:
    """Whether JAX is installed and its default device is an accelerator (a GPU or TPU).

    Imports JAX only where it is installed.
    """
    if importlib.util.find_spec("jax") is None:
        return False
    return _import_jax().default_backend() != "cpu"


def reads_distinct_rows(nuts: NUTS) -> bool:
    """Whether a run with ``nuts`` (resolved) should read X and ΔΦ as distinct rows (:mod:`.margins`).

    Not where JAX evaluates the graph on an accelerator (nutpie's ``backend="jax"``, or
    numpyro, on a GPU): there the gradient of the gather is a scatter-add of N rows onto
    the few distinct ones, whose colliding float64 adds are serialised. On an H200 at
    N = 100,000 (q = 10, the default chart) that took 1.4 ms per gradient, where the N-row
    graph's two products take a fraction of it (docs/results/posterior.md, "On a GPU").
    """
    return not ((nuts.backend == "jax" or nuts.sampler == "numpyro") and jax_accelerator())


def resolve_sampler(nuts: NUTS, n: int | None = None) -> NUTS:
    """``nuts`` with the sampler that will run, nutpie's backend, and the cores it will use.

    When none was named: nutpie when installed, else PyMC's; nutpie's backend
    ``"jax"`` where JAX sees an accelerator and the data have at least
    ``config["jax_comparisons_per_core"]`` comparisons per core (``n``, N; ``None``: any size),
    else ``"numba"``. Cores: one per usable CPU, at most one per chain, when none were named.
    """
    found = available_samplers()
    sampler = nuts.sampler or ("nutpie" if "nutpie" in found else "pymc")
    if sampler not in found:
        raise ValueError(f"nuts.sampler={sampler!r} is not installed; available: {', '.join(found)}")
    cores = min(nuts.chains, _usable_cores()) if nuts.cores is None else nuts.cores
    backend = nuts.backend
    if sampler == "nutpie":
        large = n is None or n >= get_config()["jax_comparisons_per_core"] * cores
        backend = backend or ("jax" if large and jax_accelerator() else "numba")
        if nuts.backend == "jax" and importlib.util.find_spec("jax") is None:
            raise ValueError("nuts.backend='jax' needs JAX: pip install 'bayes_loco[jax]'")
    # NUTS's own check refuses a backend beside a sampler resolved to another than nutpie.
    return dataclasses.replace(nuts, sampler=sampler, cores=cores, backend=backend)


def rms(a) -> float:
    """The root-mean-square entry of ``a`` (1 where that is 0): the scale of a start's jitter and spread."""
    return float(np.sqrt(np.mean(a * a))) or 1.0


def factor_start(u0, v0, jitter: float, rng) -> dict:
    """The balanced factors plus a jitter of ``jitter`` times their root-mean-square entry.

    Some jitter is needed even for a single shared start: nutpie refuses a start
    where a gradient entry is exactly 0 ("bad initial gradient"), which is the
    case at the minimum-norm MLE for rows of V that no comparison reaches.
    """
    return {D.LEFT: u0 + jitter * rms(u0) * rng.standard_normal(u0.shape),
            D.RIGHT: v0 + jitter * rms(v0) * rng.standard_normal(v0.shape)}


@contextlib.contextmanager
def quiet_pymc(quiet: bool):
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


def sample_nuts(model, nuts: NUTS, draw_start, seed: int, progressbar: bool, key=None,
                watch: Watch | None = None, complete: Completion | None = None) -> xr.DataTree:
    """NUTS from ``draw_start(rng)`` (one start per chain for PyMC's sampler, one shared otherwise).

    nutpie runs through :func:`sample_nutpie`, which compiles a model of
    the structure ``key`` once per process, and watches its warm-up where ``watch``
    is given (:class:`~.watch.DeepWarmup`); the others through ``pm.sample``, unwatched. The
    sampler adds no jitter of its own on top of the start's. ``complete``: (the whole model, a
    function adding to the draws the free variables that ``model`` leaves out, drawn exactly):
    the tree then carries the whole model's variables and Deterministics (:mod:`.nullspace`).
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
                                 progressbar=progressbar, backend=nuts.backend or "numba",
                                 watch=watch, complete=complete)
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
    with warnings.catch_warnings(), limit, exact_arithmetic():
        warnings.filterwarnings("ignore", category=FutureWarning)
        tree = pm.sample(**kwargs)
        if complete is not None:
            free = tree["posterior"].to_dataset()[[var.name for var in model.free_RVs]]
            tree["posterior"] = xr.DataTree(with_deterministics(free, model, complete))
    return tree


def with_deterministics(posterior: xr.Dataset, model: pm.Model, complete: Completion | None) -> xr.Dataset:
    """``posterior``'s free variables with ``model``'s Deterministics, or with ``complete`` those of the
    whole model after its function has added the free variables ``model`` leaves out."""
    if complete is not None:
        model, add = complete
        posterior = add(posterior)
    return pm.compute_deterministics(posterior, model=model, extend_dataset=True, progressbar=False)


def model_key(model: pm.Model, frame, prior: Prior) -> tuple:
    """What fixes a model's compiled log density (the ``key`` of :func:`sample_nutpie`): all but its inputs.

    The parametrisation and its ranks and span dimensions, the prior's settings
    (constants of the graph), the coordinates (the names nutpie labels draws
    with; the comparisons by their count), the data containers' names (which
    likelihood the graph holds: Bernoulli, "half" or Davidson's, :mod:`.ties`) and the free
    variables' (a chart sampled with U_⊥ and V_⊥ or without them, :mod:`.nullspace`).
    """
    shape = None if frame is None else (frame.rank, frame.chart_rank, frame.transposed, frame.left.shape,
                                         frame.right.shape, frame.left_null.shape, frame.right_null.shape)
    coords = tuple((name, len(values) if name == D.COMPARISON else tuple(map(str, values)))
                   for name, values in model.coords.items())
    return (shape, dataclasses.astuple(prior), coords, tuple(sorted(var.name for var in model.data_vars)),
            tuple(var.name for var in model.free_RVs))


def _vi_inference(model, vi: VI, u0, v0, seed: int):
    """ADVI from the frequentist start with a small initial spread (5 % of the factor scale).

    PyMC's default initial spread (σ ≈ 0.7 mean-field, 1.3 full-rank) around
    factors of size ~1, with adagrad, sends η to overflow in the first steps.
    """
    start = {D.LEFT: u0, D.RIGHT: v0}
    sigma = np.concatenate([np.full(u0.size, 0.05 * rms(u0)), np.full(v0.size, 0.05 * rms(v0))])
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


def fit_vi(model, vi: VI, u0, v0, seed: int, progressbar: bool) -> tuple[xr.DataTree, np.ndarray]:
    """Fit ADVI with Adam and draw from it (one chain); returns the draws and the loss of every iteration."""
    inference = _vi_inference(model, vi, u0, v0, seed)
    with model, exact_arithmetic():
        try:
            approx = inference.fit(n=vi.iterations, progressbar=progressbar,
                                   obj_optimizer=pm.adam(learning_rate=vi.learning_rate))
        except FloatingPointError as exc:
            raise ValueError(f"ADVI diverged: its parameters became NaN with vi.learning_rate="
                             f"{vi.learning_rate:g}; lower vi.learning_rate (the default is "
                             f"{VI.learning_rate}) or use method='nuts'") from exc
        tree = approx.sample(vi.draws, random_seed=seed + 1)
    return tree, np.asarray(approx.hist, dtype=float)


def final_loss(loss: np.ndarray) -> float:
    """The mean loss of the last 1 % of the iterations."""
    return float(np.mean(loss[-max(1, loss.size // 100):]))
