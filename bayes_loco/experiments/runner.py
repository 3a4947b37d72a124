"""Run a study's (cell, replication) tasks on any Executor, resumably, with derived seeds.

Seeds come from ``SeedSequence(seed, spawn_key=(crc32(study), cell, rep))``, so a
rerun, a parallel run or a cluster run gives the same numbers. Each finished task
appends its rows to ``<out>/<study>.csv`` in one write, with its row count; a rerun
skips the tasks whose rows are all there and repairs what a killed run left. One
runner at a time writes to a folder (an ``flock`` on ``<out>/.bayes-loco.lock``), and
the workers of a process pool end with the runner. The folder, its lock and the CSV's
writes and repairs are :mod:`.store`.
"""

from __future__ import annotations

import ctypes
import difflib
import json
import multiprocessing as mp
import os
import platform
import signal
import sys
import threading
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

from .._validation import check_int, check_level, check_option, check_real
from ..config import get_config
from ..data import PreferenceData
from ..problems import Problem
from ..simulate import CONTEXT_LAWS
from .methods import METHODS, run_methods
from .posterior_settings import POSTERIOR_PREFIX, posterior_settings
from .problems import PERSONALLLM_FILES, PROBLEM_KEYS, PROBLEM_SETTINGS, build_problem
from .store import StudyConfigError, append_task, output_folder, output_lock, resume, write_atomic
from .studies import Study

DEFAULTS = {"d_s": 20, "d_a": 10, "d_x": 20, "rank": 3, "imbalance": 1.0, "theta_kind": "paper",
            "noise_dims": 0, "covered_action": 1, "c2": 5.0, "level": 0.9, "ridge": 1.0,
            "n_initial_fraction": None, "population": 2000, "global_states": 200, "contexts_per_state": 10,
            "global_law": "shifted"}


class SettingError(StudyConfigError):
    """A setting the study does not use, or a value of the wrong kind; ``key`` names it (None if unknown)."""

    def __init__(self, key: str | None, message: str):
        super().__init__(message)
        self.key = key


def task_seed(seed: int, study: str, cell: int, rep: int) -> np.random.SeedSequence:
    """The seed of one task, derived from (study, cell, replication) only.

    Parameters
    ----------
    seed : int
        The study's base seed (``--seed``).
    study : str
        The study's name.
    cell, rep : int
        The cell's index and the replication.

    Returns
    -------
    numpy.random.SeedSequence

    Examples
    --------
    >>> from bayes_loco import experiments as ex
    >>> ex.task_seed(0, "table", 3, 1).spawn_key[1:]
    (3, 1)
    """
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

    Parameters
    ----------
    study : str
        The study's name (it enters the seed).
    cell_index : int
    settings : dict
        The cell's settings (the study's ``fixed`` and the cell's).
    rep : int
    seed : int
        The study's base seed.
    problem : str
        A key of :data:`~bayes_loco.experiments.PROBLEMS`.

    Returns
    -------
    TaskInputs

    Examples
    --------
    >>> from bayes_loco import experiments as ex
    >>> settings = {"n": 300, "imbalance": 3, "d_s": 4, "d_a": 4, "d_x": 3, "rank": 2, "population": 50}
    >>> task = ex.task_inputs("tiny", 0, settings, rep=0, seed=0)
    >>> task.data
    PreferenceData(N=300, d_x=3, d_phi=7, mean(y)=0.467)
    """
    s = DEFAULTS | settings
    seeds = task_seed(seed, study, cell_index, rep).spawn(5)
    problem_seed, data_seed, pop_seed, global_seed, fit_seed = seeds
    truth = build_problem(problem, s, problem_seed)
    data = truth.sample(int(s["n"]), seed=data_seed)
    populations = {"personalised": truth.population(int(s["population"]), seed=pop_seed)}
    if s["global_states"] and truth.has_global_populations:
        # The paper's ρ makes every action's E_x|s reward 0 (docs/design.md, pessimism point 6), so the
        # global policy is studied under a shifted context law with several contexts per state.
        populations["global"] = truth.population(int(s["global_states"]), seed=global_seed,
                                                 contexts_per_state=int(s["contexts_per_state"]),
                                                 context_law=s["global_law"])
    frac = s["n_initial_fraction"]
    n_initial = None if frac is None or pd.isna(frac) else round(frac * data.n_comparisons)
    return TaskInputs(s, truth, data, populations, n_initial, int(fit_seed.generate_state(1)[0]))


def run_task(study: str, cell_index: int, settings: dict, rep: int, seed: int,
             methods: Iterable[str], problem: str = "paper", columns: Iterable[str] = ()) -> list[dict]:
    """One replication of one cell: :func:`task_inputs`, then fit every method and evaluate the scopes.

    Parameters
    ----------
    study, cell_index, settings, rep, seed, problem
        As in :func:`task_inputs`.
    methods : iterable of str
        Keys of :data:`~bayes_loco.experiments.METHODS`.
    columns : iterable of str
        Keys of :data:`~bayes_loco.experiments.methods.EXTRA_COLUMNS`, added to every row.

    Returns
    -------
    list of dict
        The rows :func:`run_methods` returns, with the task's keys and settings and the
        warnings it raised.

    Examples
    --------
    >>> from bayes_loco import experiments as ex
    >>> settings = {"n": 300, "imbalance": 3, "d_s": 4, "d_a": 4, "d_x": 3, "rank": 2, "population": 50}
    >>> rows = ex.run_task("tiny", 0, settings, rep=0, seed=0, methods=["PRS"])
    >>> [(row["method"], row["scope"]) for row in rows]
    [('PRS', 'personalised'), ('PRS', 'global')]
    """
    task = task_inputs(study, cell_index, settings, rep, seed, problem)
    s = task.settings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = run_methods(task.truth, task.data, task.populations, list(methods), rank=int(s["rank"]),
                           c2=float(s["c2"]), level=float(s["level"]), ridge=float(s["ridge"]),
                           n_initial=task.n_initial, seed=task.fit_seed, posterior=posterior_settings(s),
                           columns=columns)
    notes = "; ".join(sorted({f"{w.category.__name__}: "
                              f"{str(w.message)[:get_config()["note_chars"]]}" for w in caught}))
    for row in rows:
        row.update({"study": study, "cell": cell_index, "rep": rep, **settings, "warnings": notes})
    return rows


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


def study_settings(study: Study) -> set[str]:
    """The settings ``study``'s tasks read: its problem's, its methods', and the labels of its cells.

    A setting outside this set changes nothing in the results, so :func:`check_overrides`
    refuses it rather than record it as a column. ``posterior_*`` settings are used
    when a method fits the posterior (:func:`~bayes_loco.experiments.posterior_settings`
    checks their form).

    Parameters
    ----------
    study : Study

    Returns
    -------
    set of str

    Examples
    --------
    >>> from bayes_loco import experiments as ex
    >>> {"n", "imbalance", "level"} <= ex.study_settings(ex.STUDIES["table"])
    True
    """
    specs = [METHODS[name] for name in study.methods]
    used = {"n", "population", "rank", "ridge"}
    used |= set(PROBLEM_SETTINGS.get(study.problem, (*DEFAULTS, *PROBLEM_KEYS)))
    if any(spec.set == "gram" for spec in specs):
        used.add("c2")
    if any(spec.set not in (None, "gram") for spec in specs):
        used.add("level")
    if any(spec.fit != "mle" for spec in specs):  # only fits that go through PRS split the data
        used.add("n_initial_fraction")
    for cell in (*study.cells, study.fixed):
        used |= set(cell)
    return used


def _uses_posterior(study: Study) -> bool:
    return any(METHODS[name].fit == "posterior" for name in study.methods)


# The settings that task_inputs and the methods convert or use without a check of their own, checked
# before any task runs; the problem's own settings are checked by building it (_check_tasks).
SETTING_CHECKS = {
    "n": lambda v: check_int(v, "n", 1),
    "population": lambda v: check_int(v, "population", 1),
    "global_states": lambda v: check_int(v, "global_states", 0),
    "contexts_per_state": lambda v: check_int(v, "contexts_per_state", 1),
    "global_law": lambda v: check_option(v, "global_law", CONTEXT_LAWS),
    "c2": lambda v: check_real(v, "c2", 0.0, low_open=True),
    "level": lambda v: check_level(v),
    "ridge": lambda v: check_real(v, "ridge", 0.0),
    "n_initial_fraction": lambda v: v is None or check_real(v, "n_initial_fraction", 0.0, 1.0, low_open=True,
                                                            high_open=True),
}


def _check_value(key: str, value, where: str = "") -> None:
    """Refuse a value of the wrong type or range for the settings of :data:`SETTING_CHECKS`."""
    if key in SETTING_CHECKS:
        try:
            SETTING_CHECKS[key](value)
        except (TypeError, ValueError) as exc:
            raise SettingError(key, f"{where}{exc}") from None


def check_overrides(study: Study, overrides: dict | None) -> None:
    """Refuse a setting that ``study`` does not use, naming the closest it does, or a value of the wrong kind.

    Parameters
    ----------
    study : Study
    overrides : dict or None
        Settings for every cell (``--set KEY=VALUE``).

    Returns
    -------
    None

    Raises
    ------
    SettingError
        Naming the setting: unknown (with the closest valid names), unused by
        this study's problem and methods, or of the wrong type or range.

    Examples
    --------
    >>> from bayes_loco import experiments as ex
    >>> ex.check_overrides(ex.STUDIES["level"], {"ridge": 0.0})            # used: no error
    >>> ex.check_overrides(ex.STUDIES["level"], {"levle": 0.5})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    bayes_loco.experiments.runner.SettingError: unknown setting 'levle' ...
    """
    used = study_settings(study)
    known = used | set(DEFAULTS) | set(PROBLEM_KEYS) | set(PERSONALLLM_FILES)
    for key, value in (overrides or {}).items():
        if key.startswith(POSTERIOR_PREFIX):
            if not _uses_posterior(study):
                raise SettingError(key, f"study {study.name!r} does not use setting {key!r}: none of its "
                                        f"methods ({', '.join(study.methods)}) fits the posterior")
            try:
                posterior_settings({key: value})
            except ValueError as exc:
                raise SettingError(key, str(exc)) from None
            continue
        if key not in used:
            close = difflib.get_close_matches(key, sorted(used), n=3)
            other = difflib.get_close_matches(key, sorted(known - used - {key}), n=1)
            hint = (f"did you mean {' or '.join(map(repr, close))}?" if close
                    else f"its settings are {', '.join(sorted(used))}")
            if other and not close:
                hint = f"the closest setting, {other[0]!r}, is not used by this study either; {hint}"
            what = (f"study {study.name!r} does not use setting {key!r} (its methods "
                    f"{', '.join(study.methods)} on the {study.problem!r} problem)" if key in known
                    else f"unknown setting {key!r} for study {study.name!r}")
            raise SettingError(key, f"{what}; {hint}")
        _check_value(key, value)


def _check_tasks(study: Study, chosen: list[int], overrides: dict, seed: int) -> None:
    """Build each chosen cell's problem, data and populations: a bad setting fails here, not in a task.

    The problem checks its own settings (rank against d_x, the imbalance, ...) and names the one at
    fault; building takes milliseconds for the simulated problems.
    """
    for i in chosen:
        settings = {**study.fixed, **study.cells[i], **overrides}
        for key, value in settings.items():
            _check_value(key, value, f"cell {i}: ")
        try:
            task_inputs(study.name, i, settings, 0, seed, study.problem)
        except (TypeError, ValueError) as exc:
            # The package's checks start their message with the argument's name.
            key = next((k for k in (DEFAULTS | settings) if str(exc).startswith(f"{k} ")), None)
            raise SettingError(key, f"cell {i} ({_describe(study.cells[i])}): {exc}") from None


def _describe(cell: dict) -> str:
    return ", ".join(f"{key}={value}" for key, value in cell.items())


def _check_arguments(reps, seed, workers) -> None:
    check_int(reps, "reps", 1)
    check_int(seed, "seed", 0)
    if workers is not None:
        check_int(workers, "workers", 1)


# ------------------------------------------------------------------------------------- workers

def _limit_threads(threads: int) -> None:
    """BLAS/OpenMP threads of this process, also for the libraries it loads later (environment)."""
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(threads)
    threadpool_limits(limits=threads)


PR_SET_PDEATHSIG = 1


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a killed runner not yet reaped by its parent is a zombie: gone for our purpose
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return True


def _start_worker(runner: int) -> None:
    """Worker initializer: one BLAS thread, and an end with the runner however it ends.

    A worker's parent is the forkserver, not the runner: the kernel kills the
    worker when the forkserver ends (``PR_SET_PDEATHSIG`` on Linux), and a
    watchdog thread ends it when the runner is gone, even if the forkserver lingers.
    """
    _limit_threads(1)
    parent = os.getppid()
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)

    def watch() -> None:
        while os.getppid() == parent and _alive(runner):
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="bayes-loco-watchdog", daemon=True).start()


def _pinned_task(*args, **kwargs) -> list[dict]:
    """:func:`run_task` with one BLAS thread, wherever it runs.

    The thread count changes the last bits of BLAS reductions; pinning it makes a
    serial run, a process pool and a Dask cluster compute alike.
    """
    with threadpool_limits(limits=1):
        return run_task(*args, **kwargs)


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
        One runner at a time writes there (:func:`output_lock`).
    reps : int, optional
        Replications per cell (default: the study's).
    seed : int
        Base seed; task seeds derive from it, the study, the cell and the replication.
    executor : concurrent.futures.Executor, optional
        Where tasks run: a Dask ``distributed.Client().get_executor()`` for a cluster;
        by default a local process pool of ``workers`` processes.
    overrides : dict, optional
        Settings applied to every cell (e.g. ``{"population": 500}``); each must be
        one the study uses (:func:`check_overrides`).
    only : dict, optional
        Run only the cells whose settings match, e.g. ``{"n": [10000]}``; their
        seeds are those of the whole study's run, so subsets run apart (on
        different machines, say) combine into it.

    Raises
    ------
    SettingError
        An override the study does not use, or a setting of the wrong kind.
    OutputFolderError
        ``out`` is a file or cannot be written.
    OutputBusyError
        Another runner holds ``out``.
    StudyConfigError
        ``out`` holds results of this study run with another configuration.

    Notes
    -----
    Every task's rows are appended in one write with the task's row count
    (``task_rows``), so a resumed run reruns a task with a missing row and cuts a
    torn last line (with a warning): whatever killed a run, every row ends up
    exactly once. Each task runs with one BLAS thread, so the numbers do not
    depend on ``workers`` or the executor.

    Returns
    -------
    pandas.DataFrame
        Every row of ``out/<name>.csv``: those run now and those already there.

    Examples
    --------
    >>> from bayes_loco import experiments as ex
    >>> tiny = ex.Study("tiny", ({"n": 300, "imbalance": 3}, {"n": 600, "imbalance": 3}),
    ...                 methods=("MLE-Greedy", "PRS-exact-Wald"), reps=2,
    ...                 fixed={"d_s": 4, "d_a": 4, "d_x": 3, "rank": 2, "population": 50, "global_states": 0})
    >>> results = ex.run_study(tiny, "tiny_study", workers=1, progress=False)
    >>> results.groupby("method")["suboptimality"].count()     # 2 cells × 2 replications
    method
    MLE-Greedy        4
    PRS-exact-Wald    4
    Name: suboptimality, dtype: int64
    """
    reps = study.reps if reps is None else reps
    _check_arguments(reps, seed, workers)
    overrides = dict(overrides or {})
    check_overrides(study, overrides)
    chosen = select_cells(study, only)
    _check_tasks(study, chosen, overrides, seed)
    out = output_folder(Path(out))
    with output_lock(out):
        return _run_locked(study, out, reps, seed, executor, workers, progress, overrides, chosen)


def _run_locked(study: Study, out: Path, reps: int, seed: int, executor: Executor | None,
                workers: int | None, progress: bool, overrides: dict, chosen: list[int]) -> pd.DataFrame:
    csv_path, meta_path = out / f"{study.name}.csv", out / f"{study.name}.json"
    config = json.loads(json.dumps(
        {"study": study.name, "seed": seed, "methods": list(study.methods),
         "cells": [dict(c) for c in study.cells], "fixed": study.fixed, "overrides": overrides,
         "defaults": DEFAULTS} | ({"columns": list(study.columns)} if study.columns else {}), default=str))
    if csv_path.exists() and meta_path.exists():
        try:
            previous = json.loads(meta_path.read_text()).get("config")
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise StudyConfigError(f"{meta_path} is not readable JSON ({exc}); delete the folder's "
                                   f"{study.name} files to start afresh") from None
        if previous != config:
            raise StudyConfigError(f"{csv_path} holds results of study {study.name!r} run with another "
                                   "configuration (seed, methods, cells or settings); use another "
                                   "output folder or delete it to start afresh")
    done = resume(csv_path)
    # Replication-major order: an interrupted run leaves every cell with about as many reps.
    tasks = [(i, {**study.fixed, **study.cells[i], **overrides}, rep)
             for rep in range(reps) for i in sorted(chosen) if (i, rep) not in done]
    reused = reps * len(chosen) - len(tasks)
    if reused and progress:
        # A rerun into the same folder computes nothing it already has: say so instead of a 0-task bar.
        print(f"{study.name}: reusing {reused} saved task(s) from {csv_path}; {len(tasks)} to run "
              "(use another --out, or delete the folder, to start afresh)", flush=True)
    meta = {"config": config, "description": study.description, "reps": reps, "versions": _versions(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    write_atomic(meta_path, json.dumps(meta, indent=2, default=str).encode())
    own = executor is None and len(tasks) > 1 and (workers or 2) > 1
    pool = executor
    if own:
        # forkserver: forking a process whose BLAS and executor threads are running can deadlock.
        pool = ProcessPoolExecutor(max_workers=workers or os.cpu_count() or 1,
                                   mp_context=mp.get_context("forkserver"),
                                   initializer=_start_worker, initargs=(os.getpid(),))
    bar = tqdm(total=len(tasks), desc=study.name, disable=not progress or not tasks, unit="task")
    try:
        if pool is None:
            for i, settings, rep in tasks:
                append_task(csv_path, _pinned_task(study.name, i, settings, rep, seed, study.methods,
                                               problem=study.problem, columns=study.columns))
                bar.update()
        else:
            futures = [pool.submit(_pinned_task, study.name, i, settings, rep, seed, study.methods,
                                   problem=study.problem, columns=study.columns)
                       for i, settings, rep in tasks]
            for future in as_completed(futures):
                append_task(csv_path, future.result())
                bar.update()
    finally:
        bar.close()
        if own:
            pool.shutdown(cancel_futures=True)
    return pd.read_csv(csv_path).sort_values(["cell", "rep", "method", "scope"], ignore_index=True)


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
