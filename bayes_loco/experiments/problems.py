"""The problems a study can run on: a name mapped to a builder ``(settings, seed) -> Problem``.

A :class:`~bayes_loco.experiments.Study` names its problem (``Study.problem``);
the runner builds it from the task's settings (the study's cell over
:data:`~bayes_loco.experiments.runner.DEFAULTS`) and the task's problem seed. A
new problem implements :class:`bayes_loco.problems.Problem` and adds its builder
here (or to :data:`PROBLEMS` at run time).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..datasets.personalllm import personalllm_problem
from ..problems import Problem
from ..simulate import paper_problem

# The settings of the paper's simulation problem (the arguments of simulate.paper_problem).
PROBLEM_KEYS = ("d_s", "d_a", "d_x", "rank", "imbalance", "theta_kind", "noise_dims", "covered_action")
PERSONALLLM_FILES = ("personalllm_train", "personalllm_test")
# The global populations' settings, read by the runner for a problem with global populations.
GLOBAL_KEYS = ("global_states", "contexts_per_state", "global_law")
# The settings each problem reads, so that the runner refuses one a study does not use. A problem added at
# run time without an entry here is taken to read every setting.
PROBLEM_SETTINGS: dict[str, tuple[str, ...]] = {
    "paper": (*PROBLEM_KEYS, *GLOBAL_KEYS),
    "personalllm": ("d_x", "rank", "noise_dims", *PERSONALLLM_FILES),
}


def _paper(settings: Mapping, seed) -> Problem:
    return paper_problem(**{key: settings[key] for key in PROBLEM_KEYS}, seed=seed)


def _personalllm(settings: Mapping, seed) -> Problem:
    missing = [key for key in PERSONALLLM_FILES if not settings.get(key)]
    if missing:
        raise ValueError(f"the personalllm problem needs the settings {missing}: the paths of the "
                         "benchmark's train and test splits (the CLI's --train and --test)")
    return personalllm_problem(settings["personalllm_train"], settings["personalllm_test"],
                               d_x=int(settings["d_x"]), rank=int(settings["rank"]),
                               noise_dims=int(settings["noise_dims"]), seed=seed)


#: The problems a study runs on, by name: each builds a :class:`~bayes_loco.Problem` from a study's settings
#: and a seed.
PROBLEMS: dict[str, Callable[[Mapping, object], Problem]] = {
    "paper": _paper,
    "personalllm": _personalllm,
}


def build_problem(name: str, settings: Mapping, seed) -> Problem:
    """The problem ``name`` of :data:`PROBLEMS` built from a task's ``settings`` and seed.

    Parameters
    ----------
    name : str
        A key of :data:`PROBLEMS` (``"paper"``, ``"personalllm"``).
    settings : Mapping
        The task's settings (the keys the problem reads, e.g. ``d_x``, ``rank``, ``imbalance``).
    seed : int, SeedSequence or Generator

    Returns
    -------
    Problem

    Examples
    --------
    >>> from bayes_loco import experiments as ex
    >>> settings = {"d_s": 4, "d_a": 4, "d_x": 3, "rank": 2, "imbalance": 3, "theta_kind": "paper",
    ...             "noise_dims": 0, "covered_action": 1}
    >>> ex.build_problem("paper", settings, seed=0).d_phi
    7
    """
    if name not in PROBLEMS:
        raise ValueError(f"problem: unknown problem {name!r}; known: {', '.join(PROBLEMS)}")
    problem = PROBLEMS[name](settings, seed)
    if not isinstance(problem, Problem):
        raise TypeError(f"the builder of problem {name!r} returned a {type(problem).__name__}, which is not "
                        "a bayes_loco.problems.Problem")
    return problem
