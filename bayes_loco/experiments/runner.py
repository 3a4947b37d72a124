"""Run a study's (cell, replication) tasks on any Executor, resumably, with derived seeds.

Seeds come from ``SeedSequence(seed, spawn_key=(crc32(study), cell, rep))``, so a
rerun, a parallel run or a cluster run gives the same numbers. Each finished task
appends its rows to ``<out>/<study>.csv``; a rerun skips the tasks already there.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import platform
import time
import warnings
import zlib
from collections.abc import Iterable
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits
from tqdm import tqdm

from ..data import PreferenceData
from ..problems import Problem
from .methods import posterior_settings, run_methods
from .problems import build_problem
from .studies import Study

DEFAULTS = {"d_s": 20, "d_a": 10, "d_x": 20, "rank": 3, "imbalance": 1.0, "theta_kind": "paper",
            "noise_dims": 0, "covered_action": 1, "c2": 5.0, "level": 0.9, "ridge": 1.0,
            "n_initial_fraction": None, "population": 2000, "global_states": 200, "contexts_per_state": 10,
            "global_law": "shifted"}


class StudyConfigError(ValueError):
    """An output folder holds results of the same study run with another configuration."""


def task_seed(seed: int, study: str, cell: int, rep: int) -> np.random.SeedSequence:
    """The seed of one task, derived from (study, cell, replication) only."""
    return np.random.SeedSequence(seed, spawn_key=(zlib.crc32(study.encode()), cell, rep))


@dataclass(frozen=True)
class TaskInputs:
    """What one task simulates before any method runs: the same for every method and every caller.

    Attributes
    ----------
    settings : dict
        The task's settings over :data:`DEFAULTS`.
    truth : Problem
    data : PreferenceData
    populations : dict
        Scope ("personalised", and "global" where the problem has global populations) → population.
    n_initial : int or None
        N₀ of PRS's data split, from ``n_initial_fraction``.
    fit_seed : int
        The posterior's random seed.
    """

    settings: dict
    truth: Problem
    data: PreferenceData
    populations: dict
    n_initial: int | None
    fit_seed: int


def task_inputs(study: str, cell_index: int, settings: dict, rep: int, seed: int,
                problem: str = "paper") -> TaskInputs:
    """Build the problem, simulate the data and draw the populations of one task, from its derived seed.

    ``problem`` names the problem (a key of :data:`~bayes_loco.experiments.PROBLEMS`,
    the study's ``problem``); it is built from ``settings`` over :data:`DEFAULTS`.
    The global policy is studied only on problems with global populations. A script
    that evaluates something other than the study's methods on a study's tasks
    starts here, and gets the study's data.
    """
    s = DEFAULTS | settings
    seeds = task_seed(seed, study, cell_index, rep).spawn(5)
    problem_seed, data_seed, pop_seed, global_seed, fit_seed = seeds
    truth = build_problem(problem, s, problem_seed)
    data = truth.sample(int(s["n"]), seed=data_seed)
    populations = {"personalised": truth.population(int(s["population"]), seed=pop_seed)}
    if s["global_states"] and truth.has_global_populations:
        # The paper's ρ makes every action's E_{x|s} reward 0 (docs/design.md, pessimism point 6), so the
        # global policy is studied under a shifted context law with several contexts per state.
        populations["global"] = truth.population(int(s["global_states"]), seed=global_seed,
                                                 contexts_per_state=int(s["contexts_per_state"]),
                                                 context_law=s["global_law"])
    frac = s["n_initial_fraction"]
    n_initial = None if frac is None or pd.isna(frac) else round(frac * data.n)
    return TaskInputs(s, truth, data, populations, n_initial, int(fit_seed.generate_state(1)[0]))


def run_task(study: str, cell_index: int, settings: dict, rep: int, seed: int,
             methods: Iterable[str], problem: str = "paper") -> list[dict]:
    """One replication of one cell: :func:`task_inputs`, then fit every method and evaluate the scopes."""
    task = task_inputs(study, cell_index, settings, rep, seed, problem)
    s = task.settings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = run_methods(task.truth, task.data, task.populations, list(methods), rank=int(s["rank"]),
                           c2=float(s["c2"]), level=float(s["level"]), ridge=float(s["ridge"]),
                           n_initial=task.n_initial, seed=task.fit_seed, posterior=posterior_settings(s))
    notes = "; ".join(sorted({f"{w.category.__name__}: {str(w.message)[:80]}" for w in caught}))
    for row in rows:
        row.update({"study": study, "cell": cell_index, "rep": rep, **settings, "warnings": notes})
    return rows


def _done(path: Path) -> set[tuple[int, int]]:
    if not path.exists():
        return set()
    done = pd.read_csv(path, usecols=["cell", "rep"])
    return set(zip(done["cell"], done["rep"], strict=True))


def select_cells(study: Study, only: dict | None) -> list[int]:
    """Indices of the study's cells whose settings match ``only`` ({setting: allowed values})."""
    if not only:
        return list(range(len(study.cells)))
    settings = [{**study.fixed, **cell} for cell in study.cells]
    known = set().union(*settings)
    unknown = sorted(set(only) - known)
    if unknown:
        raise ValueError(f"only: {unknown} are not settings of study {study.name!r}; its cells set "
                         f"{sorted(known)}")
    chosen = [i for i, cell in enumerate(settings)
              if all(cell.get(key) in list(values) for key, values in only.items())]
    if not chosen:
        raise ValueError(f"only={only} matches none of study {study.name!r}'s cells: {list(study.cells)}")
    return chosen


def _limit_threads(threads: int) -> None:
    """Worker initializer: BLAS/OpenMP threads per process, so workers do not oversubscribe the cores."""
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(threads)
    threadpool_limits(limits=threads)


def run_study(study: Study, out: str | Path, *, reps: int | None = None, seed: int = 0,
              executor: Executor | None = None, workers: int | None = None,
              progress: bool = True, overrides: dict | None = None,
              only: dict | None = None) -> pd.DataFrame:
    """Run (or resume) ``study`` and return its tidy results (one row per method × scope × task).

    Parameters
    ----------
    study : Study
    out : path
        Folder for ``<name>.csv`` (appended per task) and ``<name>.json`` (metadata).
    reps : int, optional
        Replications per cell (default: the study's).
    seed : int
        Base seed; task seeds derive from it, the study, the cell and the replication.
    executor : concurrent.futures.Executor, optional
        Where tasks run: a Dask ``distributed.Client().get_executor()`` for a cluster;
        by default a local process pool of ``workers`` processes.
    overrides : dict, optional
        Settings applied to every cell (e.g. ``{"population": 500}``).
    only : dict, optional
        Run only the cells whose settings match, e.g. ``{"n": [10000]}``; their
        seeds are those of the whole study's run, so subsets run apart (on
        different machines, say) combine into it.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    reps = study.reps if reps is None else int(reps)
    csv, meta_path = out / f"{study.name}.csv", out / f"{study.name}.json"
    config = json.loads(json.dumps(
        {"study": study.name, "seed": seed, "methods": list(study.methods),
         "cells": [dict(c) for c in study.cells], "fixed": study.fixed, "overrides": overrides or {},
         "defaults": DEFAULTS}, default=str))
    if csv.exists() and meta_path.exists():
        previous = json.loads(meta_path.read_text()).get("config")
        if previous != config:
            raise StudyConfigError(f"{csv} holds results of study {study.name!r} run with another "
                                   "configuration (seed, methods, cells or settings); use another "
                                   "output folder or delete it to start afresh")
    done = _done(csv)
    chosen = set(select_cells(study, only))
    for cell in study.cells:  # a malformed posterior_* setting fails here, not in every task
        posterior_settings({**study.fixed, **cell, **(overrides or {})})
    # Replication-major order: an interrupted run leaves every cell with about as many reps.
    tasks = [(i, {**study.fixed, **cell, **(overrides or {})}, rep)
             for rep in range(reps) for i, cell in enumerate(study.cells)
             if i in chosen and (i, rep) not in done]
    meta = {"config": config, "description": study.description, "reps": reps, "versions": _versions(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    meta_path.write_text(json.dumps(meta, indent=2, default=str))
    own = executor is None and len(tasks) > 1 and (workers or 2) > 1
    # forkserver: forking a process whose BLAS and executor threads are running can deadlock.
    pool = executor
    if own:
        cores = os.cpu_count() or 1
        n_workers = workers or cores
        pool = ProcessPoolExecutor(max_workers=n_workers, mp_context=mp.get_context("forkserver"),
                                   initializer=_limit_threads, initargs=(max(1, cores // n_workers),))
    bar = tqdm(total=len(tasks), desc=study.name, disable=not progress, unit="task")
    try:
        if pool is None:
            for i, settings, rep in tasks:
                _append(csv, run_task(study.name, i, settings, rep, seed, study.methods,
                                      problem=study.problem))
                bar.update()
        else:
            futures = [pool.submit(run_task, study.name, i, settings, rep, seed, study.methods,
                                   problem=study.problem)
                       for i, settings, rep in tasks]
            for future in as_completed(futures):
                _append(csv, future.result())
                bar.update()
    finally:
        bar.close()
        if own:
            pool.shutdown(cancel_futures=True)
    return pd.read_csv(csv).sort_values(["cell", "rep", "method", "scope"], ignore_index=True)


def _append(csv: Path, rows: list[dict]) -> None:
    frame = pd.DataFrame(rows)
    if csv.exists():
        columns = pd.read_csv(csv, nrows=0).columns
        frame = frame.reindex(columns=columns)
    frame.to_csv(csv, mode="a", header=not csv.exists(), index=False)


def _versions() -> dict:
    import importlib.metadata as md

    names = ("bayes_loco", "numpy", "scipy", "pandas", "pymc", "arviz")
    out = {"python": platform.python_version()}
    for name in names:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


def summarise(results: pd.DataFrame, by: Iterable[str]) -> pd.DataFrame:
    """Mean, standard error and replication count of sub-optimality, and coverage, per group.

    ``coverage`` is of θ* by the set, ``value_coverage`` of the policy's true value by its pessimistic
    value (results written before that column existed have no ``value_coverage``).
    """
    grouped = results.groupby(list(by), dropna=False)
    table = grouped["suboptimality"].agg(mean="mean", se=lambda v: v.std(ddof=1) / np.sqrt(len(v)),
                                         reps="count")
    table["coverage"] = grouped["covered"].mean()
    if "value_covered" in results:
        table["value_coverage"] = grouped["value_covered"].mean()
    table["theta_error"] = grouped["theta_error"].mean()
    if "selected_rank" in results and "rank" in results:
        hit = (results["selected_rank"] == results["rank"]).where(results["selected_rank"].notna())
        table["rank_correct"] = hit.groupby([results[b] for b in by], dropna=False).mean()
    return table.reset_index()
