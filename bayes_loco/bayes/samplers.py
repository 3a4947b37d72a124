"""nutpie behind :func:`~bayes_loco.bayes.fit_posterior`, compiled once per model shape.

``pm.sample(nuts_sampler="nutpie")`` compiles the model's log density and gradient
with numba on every call: 12.6 s of the 80 s a default fit took at N = 10,000, paid
again by every seed of a study and every re-run of a notebook cell. The models of
this package take everything that varies between data sets of one shape as shared
inputs (the data containers, and the chart's frame: :func:`~.chart.frame_inputs`), so
one compiled model serves them all: :func:`sample_nutpie` keeps the last
:data:`CACHE_SIZE` compiled models, keyed by the caller's description of the model's
structure (``key``: parametrisation, ranks, dimensions, N, prior), and on a hit swaps
in the new inputs (``CompiledPyMCModel.with_data``) and the new start.

A cached model draws exactly what a fresh compilation would: the seeds are derived
as ``pm.sample`` derives them, and ``tests/test_bayes_samplers.py`` checks the draws of
a second fit against a fit compiled anew.
"""

from __future__ import annotations

import dataclasses
import time
from collections import OrderedDict
from collections.abc import Hashable

import numpy as np
import nutpie
import pymc as pm
import xarray as xr
from pymc.backends.arviz import patch_nutpie_idata
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.traversal import graph_inputs

# Compiled models kept per process (a chart model at the paper's sizes holds a few MB).
CACHE_SIZE = 8
_CACHE: OrderedDict[Hashable, object] = OrderedDict()


def clear_cache() -> None:
    """Forget every compiled model (the next fit of each shape compiles again)."""
    _CACHE.clear()


def _shared_inputs(model: pm.Model, compiled) -> dict[str, np.ndarray] | None:
    """The new model's values of the compiled model's shared inputs, by name; None if one is missing.

    The data containers are the model's data variables; the chart's frame inputs
    are found among the inputs of its Deterministics (U and V read every one), which
    is cheaper than building the log density's graph.
    """
    named = {var.name: var for var in model.data_vars}
    named |= {var.name: var for var in graph_inputs(model.deterministics) if isinstance(var, SharedVariable)}
    values = {}
    for var in compiled.shared_var_keys:
        if var.name not in named:
            return None
        values[var.name] = named[var.name].get_value(borrow=True)
    return values


def _initial_point(model: pm.Model, start: dict, compiled):
    """The flat initial point nutpie calls for, at ``start`` on ``model``, or None if it cannot be spliced.

    The cached model's own function gives the point of its first start; the
    variables ``start`` names are replaced in it (they are untransformed, so their
    values are the point's). Compiling PyMC's initial point function again would
    cost about a second.
    """
    layout, offset = {}, 0
    for rv in model.free_RVs:
        name = model.rvs_to_values[rv].name
        size = int(np.prod(compiled.shapes[name], dtype=int))
        layout[name] = (slice(offset, offset + size), rv)
        offset += size
    for name, value in start.items():
        if name not in layout or model.rvs_to_transforms.get(layout[name][1]) is not None:
            return None
        if np.size(value) != layout[name][0].stop - layout[name][0].start:
            return None
    previous = compiled.initial_point_func

    def flat(seed=None):
        point = np.array(previous(seed), dtype=np.float64)
        for name, value in start.items():
            point[layout[name][0]] = np.asarray(value, dtype=np.float64).reshape(-1)
        return point

    return flat


def compiled_model(model: pm.Model, key: Hashable, start: dict) -> tuple[object, float, bool]:
    """nutpie's compiled ``model`` started at ``start``: (compiled, seconds spent, reused).

    A model cached under ``key`` is reused with ``model``'s shared inputs and start;
    otherwise the model is compiled (numba) and cached.
    """
    t0 = time.perf_counter()
    cached = _CACHE.get(key)
    if cached is not None:
        inputs = _shared_inputs(model, cached)
        initial = None if inputs is None else _initial_point(model, start, cached)
        if initial is not None:
            _CACHE.move_to_end(key)
            reused = dataclasses.replace(cached.with_data(**inputs), initial_point_func=initial)
            return reused, time.perf_counter() - t0, True
    compiled = nutpie.compile_pymc_model(model, initial_points=start, jitter_rvs=set(), backend="numba")
    _CACHE[key] = compiled
    while len(_CACHE) > CACHE_SIZE:
        _CACHE.popitem(last=False)
    return compiled, time.perf_counter() - t0, False


def sample_nutpie(model: pm.Model, key: Hashable, start: dict, *, draws: int, tune: int, chains: int,
                  cores: int, seed: int, target_accept: float, progressbar: bool) -> xr.DataTree:
    """nutpie's NUTS on ``model`` from ``start``, compiled once per ``key`` (see the module docstring).

    The tree is ``pm.sample``'s: the same groups, the same seeds for the same
    ``seed``; its posterior's attrs add ``compile_time`` (seconds) and
    ``compiled_model_reused``.
    """
    compiled, compile_seconds, reused = compiled_model(model, key, start)
    # pm.sample's derivation of the sampler's seed, so that a fit draws what it drew through pm.sample.
    seeds = [int(rng.integers(2**30)) for rng in np.random.default_rng(seed).spawn(chains)]
    t0 = time.time()
    tree = nutpie.sample(compiled, draws=draws, tune=max(tune, 1), chains=chains, cores=cores, seed=seeds[0],
                         save_warmup=False, store_unconstrained=False, progress_bar=progressbar,
                         target_accept=target_accept)
    patch_nutpie_idata(tree, model, sampling_time=time.time() - t0)
    tree["posterior"].attrs["compile_time"] = compile_seconds
    tree["posterior"].attrs["compiled_model_reused"] = int(reused)
    return tree
