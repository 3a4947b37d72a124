"""Study definitions: a grid of cells, the methods and the evaluation populations."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from .methods import DEFAULT_METHODS, EXTRA_COLUMNS, METHODS
from .problems import PROBLEMS


@dataclass(frozen=True)
class Study:
    """A grid of simulation settings; every (cell, replication) is one independent task.

    ``cells`` holds the varying settings (the problem's settings, e.g. the keys
    of :func:`bayes_loco.simulate.paper_problem`, plus ``n`` and
    ``n_initial_fraction``); ``fixed`` the rest. ``problem`` names the problem
    the tasks run on (a key of :data:`~bayes_loco.experiments.PROBLEMS`).
    ``x``, ``panel`` and ``y`` name the figure's axis, panel and plotted
    variables. ``columns`` names extra columns of every row (keys of
    :data:`~bayes_loco.experiments.methods.EXTRA_COLUMNS`), and ``figure`` a
    figure of the study's own (a key of :data:`~bayes_loco.experiments.figures.STUDY_FIGURES`)
    drawn beside the standard ones.
    """

    name: str
    cells: tuple[dict, ...]
    methods: tuple[str, ...] = DEFAULT_METHODS
    fixed: dict = field(default_factory=dict)
    x: str = "n"
    panel: str = "imbalance"
    y: str = "suboptimality"
    reps: int = 20
    description: str = ""
    problem: str = "paper"
    columns: tuple[str, ...] = ()
    figure: str | None = None

    def __post_init__(self):
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown:
            raise ValueError(f"study {self.name!r}: unknown methods {unknown}; known: {', '.join(METHODS)}")
        unknown = [c for c in self.columns if c not in EXTRA_COLUMNS]
        if unknown:
            raise ValueError(f"study {self.name!r}: unknown columns {unknown}; known: "
                             f"{', '.join(EXTRA_COLUMNS)}")
        if self.problem not in PROBLEMS:
            raise ValueError(f"study {self.name!r}: unknown problem {self.problem!r}; known: "
                             f"{', '.join(PROBLEMS)}")


def _grid(**axes) -> tuple[dict, ...]:
    keys = list(axes)
    return tuple(dict(zip(keys, values, strict=True)) for values in itertools.product(*axes.values()))


ALL_METHODS = ("MLE-Greedy", "MLE-Pessimistic", "PRS", "PRS-exact-Wald", "PRS-relaxed-Wald", "PRS-exact-Gram")
POSTERIOR_METHODS = ("MLE-Greedy", "PRS", "PRS-exact-Wald", "Posterior-mean-Greedy",
                     "Posterior-exact-ellipsoid", "Posterior-exact-draws", "Posterior-relaxed-quantile")

# Distribution shift (docs/design.md, "Distribution shift"): the action the data cover, the deployment law.
REGIMES = {
    "paper": {"covered_action": 1, "global_law": "shifted"},
    "covered": {"covered_action": 1, "global_law": "target"},
    "uncovered": {"covered_action": 2, "global_law": "target"},
}
SHIFT_METHODS = ("MLE-Greedy", "MLE-Pessimistic", "PRS", "PRS-exact-Wald", "PRS-exact-Wald-values")
SHIFT_POSTERIOR_METHODS = ("MLE-Greedy", "PRS-exact-Wald-values", "Posterior-mean-Greedy",
                           "Posterior-exact-cvar", "Posterior-exact-ellipsoid-values")


# Reward-model width (the "width" study's grid of noise_dims): d_φ = d_a − 1 + d_s + noise_dims = 29 +
# noise_dims of 40, 512 and 4,096 (the last is benchmarks/bench_scale.py --target width's problem),
# N = 100,000, d_x = 32, r = 4.
WIDTH_FIXED = {"n": 100_000, "d_x": 32, "rank": 4, "imbalance": 3, "global_states": 0}
WIDTH_METHODS = ("PRS-Greedy", "PRS-exact-Wald", "PRS-relaxed-family", "PRS-best-of-exact-and-family",
                 "PRS-relaxed-family-frontier", "PRS-split-certified", "PRS-split-certified-row-space",
                 "PRS-best-of-exact-and-row-space")
WIDTH_POSTERIOR_METHODS = ("PRS-Greedy", "PRS-exact-Wald", "PRS-relaxed-family", "Posterior-mean-Greedy",
                           "Posterior-exact-ellipsoid", "Posterior-relaxed-family")
# The coverage studies' generator: a fresh rank-2 Θ* per seed (theta_kind='random'), d_x = 10, d_φ = 14,
# 100 rows x 9 actions.
COVERAGE_FIXED = {"theta_kind": "random", "d_x": 10, "d_s": 5, "rank": 2, "imbalance": 1, "population": 100,
                  "global_states": 0}
FAMILY_COLUMNS = ("improvement", "reference_share", "family_covered", "bonferroni", "critical_error",
                  "members")


def _regimes(imbalances) -> tuple[dict, ...]:
    return tuple({"regime": regime, **settings, "imbalance": q}
                 for regime, settings in REGIMES.items() for q in imbalances)


def _coverage_study(name: str, methods: tuple[str, ...], description: str) -> Study:
    """A study of 300 seeds on the coverage generator (:data:`COVERAGE_FIXED`) at N = 2,000 and 20,000."""
    return Study(name, _grid(n=[2000, 20000]), methods=methods, reps=300, fixed=COVERAGE_FIXED,
                 columns=FAMILY_COLUMNS, description=description)


#: Every study ``bayes-loco run`` knows, by name (``bayes-loco run --help`` lists them).
STUDIES: dict[str, Study] = {
    "demo": Study("demo", _grid(n=[3000], imbalance=[3]), reps=3,
                  methods=(*DEFAULT_METHODS, "PRS-exact-Wald-values"), fixed={"global_law": "target"},
                  description="one setting, the main methods, personalised and a shifted global policy"),
    "table": Study("table", _grid(n=[1000, 3000, 10000], imbalance=[1, 3, 10]), methods=ALL_METHODS,
                   description="sub-optimality of the six methods over N x q, r = 3 (the paper's table)"),
    "table-large": Study("table-large", _grid(n=[3000, 10000], imbalance=[1, 3, 10]), reps=10,
                         description="the main methods at N = 3,000 and 10,000 (the table's larger cells)"),
    "table-10k": Study("table-10k", _grid(n=[10000], imbalance=[1, 3, 10]),
                       description="the main methods at N = 10,000 (the table's largest cells)"),
    "imbalance": Study("imbalance", _grid(n=[1000, 2000, 3000, 5000, 10000], imbalance=[1, 3, 10]),
                       description="the paper's figure: sub-optimality against N for each imbalance q"),
    "rank": Study("rank", _grid(n=[1000, 2000, 3000, 5000, 10000], rank=[1, 3, 5]),
                  fixed={"imbalance": 3}, panel="rank",
                  description="the paper's figure: sub-optimality against N for each rank r, q = 3"),
    "split": Study("split", _grid(n=[1000, 3000, 10000], n_initial_fraction=[0.2, 0.5, 0.8, None]),
                   fixed={"imbalance": 3}, methods=("PRS",), panel="n_initial_fraction",
                   description="appendix: PRS against the initial split N0/N"),
    "c2": Study("c2", _grid(n=[1000, 3000, 10000], c2=[1.0, 5.0, 10.0]), fixed={"imbalance": 3},
                methods=("PRS", "MLE-Pessimistic"), panel="c2",
                description="appendix: sensitivity to the pessimism strength C2"),
    "coverage": Study("coverage", _grid(n=[1000, 3000, 10000], imbalance=[1, 3, 10]), reps=50,
                      methods=("PRS", "PRS-relaxed-Wald"), fixed={"population": 20, "global_states": 0},
                      description="coverage of θ*_rtv by the paper's set (C2 = 5) and the Wald 90% set"),
    "rank-selection": Study(
        "rank-selection", _grid(n=[1000, 3000, 10000], imbalance=[1, 3]), methods=("PRS", "PRS-GIC"),
        fixed={"theta_kind": "diagonal", "rank": 3, "global_states": 0}, reps=10,
        description="appendix: GIC rank selection against N, and PRS at the chosen rank"),
    "posterior-vs-ellipsoid": Study(
        "posterior-vs-ellipsoid", _grid(n=[1000, 3000, 10000], imbalance=[1, 3, 10]),
        methods=POSTERIOR_METHODS,
        description="PRS and the Wald set against the posterior's sets, with coverage"),
    "posterior-coverage": Study(
        "posterior-coverage", _grid(theta_kind=["paper", "diagonal"], n=[3000]), reps=50,
        methods=("PRS", "PRS-relaxed-Wald", "Posterior-exact-ellipsoid", "Posterior-exact-sandwich"),
        panel="theta_kind",
        fixed={"imbalance": 1, "population": 20, "global_states": 0},
        description="coverage of θ*_rtv by the credible, sandwich, Wald and paper's sets"),
    "strength": Study("strength", _grid(imbalance=[3, 10], c2=[0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0]),
                      fixed={"n": 3000}, methods=("PRS", "PRS-exact-Gram"), x="c2", reps=10,
                      description="pessimism strength: sub-optimality against C2 (Gram set)"),
    "level": Study("level", _grid(imbalance=[3, 10], level=[0.5, 0.7, 0.9, 0.95, 0.99]),
                   fixed={"n": 3000}, methods=("PRS-exact-Wald", "PRS-relaxed-Wald"), x="level", reps=10,
                   description="pessimism strength: sub-optimality against the Wald set's level"),
    "runtime": Study("runtime", tuple({"d_x": dx, "d_s": dp - 9} for dx, dp in
                                      [(30, 30), (30, 50), (50, 50), (100, 30), (100, 50)]),
                     fixed={"n": 10000, "imbalance": 3, "population": 200, "global_states": 0},
                     methods=("MLE-Greedy", "MLE-Pessimistic", "PRS"), x="d_x", panel="d_s", y="fit_seconds",
                     reps=3,
                     description="run time of each method against (d_x, d_phi) at N = 10,000"),
    "personalllm": Study("personalllm", _grid(n=[1000, 3000, 10000], noise_dims=[0, 10]),
                         fixed={"d_x": 10, "global_states": 0}, panel="noise_dims", problem="personalllm",
                         description="PersonalLLM: reward-model scores as features, with and without noise"),
    "shift": Study("shift", _regimes([1, 3, 10, 30]), fixed={"n": 3000}, methods=SHIFT_METHODS,
                   x="imbalance", panel="regime",
                   description="distribution shift: global policies, the best action covered or not"),
    "shift-posterior": Study("shift-posterior", _regimes([10]), fixed={"n": 3000},
                             methods=SHIFT_POSTERIOR_METHODS, x="imbalance", panel="regime", reps=10,
                             description="distribution shift at q = 10 with the posterior's sets"),
    # d_φ = 29 + noise_dims = 40, 512, 4,096 at N = 100,000, d_x = 32, r = 4: the greedy policy of PRS's
    # estimate, the exact policy of the 90% Wald set and the relaxed policy of the 90% value family
    # (max-|t| simultaneous intervals for the population's row x action values), with its radius frontier.
    "width": Study(
        "width", _grid(noise_dims=[11, 483, 4067]), fixed=WIDTH_FIXED, methods=WIDTH_METHODS,
        x="noise_dims", columns=FAMILY_COLUMNS, figure="width",
        description="reward-model width: the value family against the Wald set, d_phi to 4,096"),
    # The width study's d_φ = 40 cell at N = 3,000 with the posterior's value family (max-rank bands of
    # NUTS draws) beside the Wald set's.
    "width-posterior": Study(
        "width-posterior", _grid(noise_dims=[11]), methods=WIDTH_POSTERIOR_METHODS,
        fixed={**WIDTH_FIXED, "n": 3000}, x="noise_dims", columns=FAMILY_COLUMNS,
        description="the width study's d_phi = 40 cell with the posterior's value family"),
    # Coverage of the 90% value family's simultaneous intervals, of the true values (family_covered) and
    # of θ*_rtv's (covered), from PRS's Wald set and from the MLE's: a fresh rank-2 Θ* per seed
    # (theta_kind='random'), d_x = 10, d_φ = 14, N = 2,000 and 20,000, 100 rows x 9 actions.
    "family-coverage": _coverage_study("family-coverage", ("PRS-relaxed-family", "MLE-relaxed-family"),
                                       "coverage of the value family's intervals, a fresh theta* per seed"),
    # Whether the split-certified policy's bound holds (value_covered: every seed's deployed policy) on
    # the family-coverage generator, with the greedy policy of the whole data's PRS fit beside it.
    "certified-coverage": _coverage_study("certified-coverage", ("PRS-Greedy", "PRS-split-certified"),
                                          "how often the certified policy's bound holds, fresh theta*"),
    # The same where the reduced model has a reward model's coordinates per comparison: 200 noise
    # dimensions (d_φ = 214, k = 444 on N₂ = 1,500, k / N₂ = 0.30 as at d_φ = 4,096), both certificates.
    "certified-wide-coverage": Study(
        "certified-wide-coverage", _grid(n=[3000]), reps=100, fixed={**COVERAGE_FIXED, "noise_dims": 200},
        methods=("PRS-Greedy", "PRS-split-certified", "PRS-split-certified-row-space"),
        columns=FAMILY_COLUMNS, description="certified bounds at a reward model's k / N (0.3), fresh theta*"),
    # Both certificates on the paper's simulation with pure-noise features (d_φ = 40 and 200, N = 4,000),
    # beside the greedy and the exact Wald policies of PRS on all the data.
    "certified-paper": Study(
        "certified-paper", _grid(noise_dims=[11, 171]), reps=20,
        fixed={**WIDTH_FIXED, "n": 4000, "population": 200},
        methods=("PRS-Greedy", "PRS-exact-Wald", "PRS-split-certified", "PRS-split-certified-row-space",
                 "PRS-best-of-exact-and-row-space"), x="noise_dims", columns=FAMILY_COLUMNS,
        description="certified bounds on the paper's simulation with pure-noise features"),
    "noise": Study("noise", _grid(n=[1000, 3000, 10000], noise_dims=[0, 10, 20]), fixed={"imbalance": 3},
                   panel="noise_dims", description="appendix: pure-noise feature dimensions"),
}
