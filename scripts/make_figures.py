"""Make the figures of :mod:`bayes_loco.plots` from a seeded run of the paper's simulation.

    .venv/bin/python scripts/make_figures.py [--out docs/figures] [--cache DIR]

Writes ``plots_sets.png``, ``plots_spectrum.png``, ``plots_reward_intervals.png``,
``plots_policies.png``, ``plots_calibration.png`` and ``plots_results.png``. The data are the
§5.1 simulation with r = 3, q = 3, N = 3000 (``paper_problem(rank=3, imbalance=3, seed=0)``):
PRS with its Wald and Gram sets, and a NUTS posterior (2 chains × 300 draws, PyMC) started at
PRS's low-rank fit, so that every set lives in the same RTV coordinates. The calibration
figure comes from a small coverage run (the ``coverage`` study at N = 1000 and 3000, q = 1,
50 seeds). ``--cache`` keeps the posterior and the coverage run between invocations. About
five minutes on two cores.
"""

from __future__ import annotations

import argparse
import tempfile
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # a script's own choice; bayes_loco.plots never selects a backend

import matplotlib.pyplot as plt
import numpy as np

import bayes_loco as bl
from bayes_loco import plots
from bayes_loco.experiments import STUDIES, compare_policies, figures, run_study

ROOT = Path(__file__).resolve().parents[1]
N, RANK, IMBALANCE, LEVEL = 3000, 3, 3, 0.9
FIGURES = ("sets", "spectrum", "reward_intervals", "policies", "calibration", "results")
SETTING = f"§5.1 simulation, N = {N}, r = {RANK}, q = {IMBALANCE}"


def fits(cache: Path | None):
    """The problem, data, population, PRS fit and the NUTS posterior (cached when asked)."""
    problem = bl.simulate.paper_problem(rank=RANK, imbalance=IMBALANCE, seed=0)
    data = problem.sample(N, seed=1)
    population = problem.population(500, seed=2)
    prs = bl.fit_prs(data, RANK)
    path = None if cache is None else cache / "posterior.nc"
    if path is not None and path.exists():
        post = bl.load(path)
    else:
        from bayes_loco import bayes

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", bl.SamplerWarning)  # 300 draws: R-hat is reported, not hidden
            post = bayes.fit_posterior(data, RANK, nuts={"draws": 300, "tune": 300, "chains": 2, "cores": 1,
                                                         "sampler": "pymc"},
                                       start=prs.low_rank, progressbar=False)
        if path is not None:
            bl.save(post, path)
    return problem, data, population, prs, post


def sets_of(prs, post) -> dict:
    return {"credible 90%": post.calibrated_set(LEVEL, "credible"),
            "Wald 90% (PRS)": prs.calibrated_set(LEVEL),
            "sandwich 90%": post.calibrated_set(LEVEL, "sandwich"),
            "Gram, C₂ = 5 (PRS)": prs.penalty_set(5.0),
            "hull of 90% of draws": post.calibrated_set(LEVEL, "draws")}


def figure_sets(problem, population, prs, post, sets, out: Path) -> Path:
    fig, (left, right) = plt.subplots(1, 2, figsize=(14.5, 6.6), layout="constrained")
    plots.plot_sets(sets, draws=post.rtv_draws, truth=problem, ax=left)
    left.set_title("(a) the two directions where the credible and Wald sets differ most", fontsize=10)
    wald = sets["Wald 90% (PRS)"]
    policy = bl.pessimistic_policy(wald, population, objective="exact")
    m = plots.value_direction(policy, wald, population)
    other = np.eye(m.size)[0]  # θ_rtv "11 (u0, v0)", the leading coordinate, orthogonalised against m(π)
    plots.plot_sets(sets, directions=np.column_stack([m, other]), draws=post.rtv_draws, truth=problem,
                    labels=["m(π)ᵀθ_rtv / ‖m(π)‖: value direction of the PRS-exact-Wald policy π",
                            "θ_rtv 11 (u0, v0), orthogonalised against m(π)"], ax=right)
    right.set_title("(b) along the policy's value direction: its worst case over each set is the "
                    "leftmost point", fontsize=10)
    fig.suptitle(f"Uncertainty sets for θ_rtv projected on two directions ({SETTING}; grey: "
                 f"{post.rtv_draws.shape[0]} posterior draws)", fontsize=11)
    return save(fig, out / "plots_sets.png")


def figure_spectrum(prs, post, sets, out: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8.5, 5.2), layout="constrained")
    items = {"Gram W = Σ z zᵀ (paper's set)": sets["Gram, C₂ = 5 (PRS)"],
             "Fisher information (Wald)": sets["Wald 90% (PRS)"],
             "posterior precision on the identified directions (credible)": sets["credible 90%"],
             "sandwich (Σ F Σ)⁻¹": sets["sandwich 90%"],
             "posterior precision, all k directions": np.linalg.inv(post.rtv_covariance)}
    plots.plot_spectrum(items, ax=ax)
    ax.set_title(f"Eigenvalues of W: which directions of θ_rtv the comparisons reach ({SETTING})",
                 fontsize=10)
    return save(fig, out / "plots_spectrum.png")


def figure_reward_intervals(problem, population, post, sets, out: Path) -> Path:
    shown = {name: s for name, s in sets.items() if not name.startswith("Gram")}
    shown["Gram, C₂ = 5 (PRS)"] = sets["Gram, C₂ = 5 (PRS)"]
    shown["pointwise 90% quantile"] = post.calibrated_set(LEVEL, "quantile")
    # A row where the exact pessimistic policy under the credible set mixes: the intervals overlap.
    policy = bl.pessimistic_policy(sets["credible 90%"], population, objective="exact")
    mixed = np.flatnonzero(policy.probabilities.max(axis=1) < 1 - 1e-9)
    row = int(mixed[0]) if mixed.size else 0
    fig, ax = plt.subplots(figsize=(9.0, 9.5), layout="constrained")
    plots.plot_reward_intervals(shown, population, row, truth=problem, ax=ax)
    ax.set_title(f"Reward of each action relative to a = 0 at one (x, s) (population row {row}), "
                 f"under each set\n({SETTING})", fontsize=10)
    return save(fig, out / "plots_reward_intervals.png")


def figure_policies(population, prs, post, sets, out: Path) -> Path:
    credible, draws = sets["credible 90%"], sets["hull of 90% of draws"]
    policies = {
        "greedy (low-rank fit)": bl.greedy_policy(prs.low_rank.theta, population),
        "PRS (paper: Gram, relaxed)": bl.pessimistic_policy(sets["Gram, C₂ = 5 (PRS)"], population),
        "Wald 90%, exact": bl.pessimistic_policy(sets["Wald 90% (PRS)"], population, objective="exact"),
        "credible 90%, exact": bl.pessimistic_policy(credible, population, objective="exact"),
        "hull of draws, exact": bl.pessimistic_policy(draws, population, objective="exact"),
        "pointwise quantile, relaxed": bl.pessimistic_policy(post.calibrated_set(LEVEL, "quantile"),
                                                             population),
    }
    fig, ax = plt.subplots(figsize=(13.0, 4.8), layout="constrained")
    plots.plot_policies(policies, max_units=40, ax=ax)
    ax.set_title(f"Each method's action at the first 40 (x, s) of the evaluation population ({SETTING})",
                 fontsize=10)
    return save(fig, out / "plots_policies.png")


def figure_calibration(out: Path, cache: Path | None) -> Path:
    folder = cache / "coverage" if cache is not None else Path(tempfile.mkdtemp(prefix="coverage-"))
    results = run_study(STUDIES["coverage"], folder, reps=50, only={"n": [1000, 3000], "imbalance": [1]},
                        progress=False, workers=2)
    results = results.assign(method=results["method"].replace({"PRS-relaxed-Wald": "Wald (PRS)"}))
    fig = figures.plot_calibration(results, panel="n", title="Coverage of θ*_rtv by the Wald set (PRS) "
                                   "against its level; §5.1 simulation, r = 3, q = 1")
    return save(fig, out / "plots_calibration.png")


def figure_results(problem, data, population, prs, post, out: Path) -> Path:
    frame = compare_policies(data, population, rank=RANK, truth=problem, fits={"prs": prs, "posterior": post},
                             level=LEVEL)
    fig = figures.plot_results(frame, title=f"Sub-optimality of every method's policy on one data set "
                                          f"(compare_policies; {SETTING})")
    return save(fig, out / "plots_results.png")


def save(fig, path: Path) -> Path:
    fig.savefig(path, dpi=130)
    plt.close(fig)
    print(f"figure: {path}")
    return path


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "figures")
    parser.add_argument("--cache", type=Path, default=None, help="keep the posterior and coverage run here")
    parser.add_argument("--only", nargs="*", default=None,
                        help=f"figures to make (default all): {' '.join(FIGURES)}")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.cache is not None:
        args.cache.mkdir(parents=True, exist_ok=True)
    only = set(args.only or FIGURES)
    if "calibration" in only:
        figure_calibration(args.out, args.cache)
    if only - {"calibration"}:
        problem, data, population, prs, post = fits(args.cache)
        print(f"posterior: {post!r}")
        sets = sets_of(prs, post)
        if "sets" in only:
            figure_sets(problem, population, prs, post, sets, args.out)
        if "spectrum" in only:
            figure_spectrum(prs, post, sets, args.out)
        if "reward_intervals" in only:
            figure_reward_intervals(problem, population, post, sets, args.out)
        if "policies" in only:
            figure_policies(population, prs, post, sets, args.out)
        if "results" in only:
            figure_results(problem, data, population, prs, post, args.out)


if __name__ == "__main__":
    main()
