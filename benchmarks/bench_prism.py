"""The contextual road at PRISM's size: fit_prs, its Wald set and user-grouped cross-validation, timed.

PRISM (Kirk et al. 2024) has about 68,000 comparisons from 1,500 users with survey answers,
among 21 models. This GENERATED stand-in has that shape: 1,500 users, each with 30 survey
features (an intercept and 29 binary answers) and 45 comparisons of two of 21 models
(popularity skewed), from a rank-2 Θ* (rewards with standard deviation 1 over users and models)
and 10 % ties; the data are item-indexed with names (``PreferenceData.from_items``).

Timed stages: ``fit_prs(data, rank=2)``; its 95 % Wald set; ``cross_validate`` with 5 folds
by user (each fold a PRS fit and its held-out scores); plain Bradley–Terry's cross-validation
beside it, the baseline a leaderboard would give. Prints the table, writes it to ``--out`` and
the figure (Θ̂ by survey feature × model against Θ*, and the stage times) to ``--figure``::

    PYTHONPATH=$PWD python benchmarks/bench_prism.py --out prism_bench.csv --figure prism.png
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from scipy.special import expit

import bayes_loco as bl

USERS, PER_USER, FEATURES, MODELS, RANK, TIES = 1500, 45, 30, 21, 2, 0.10


def generate(seed: int = 0) -> tuple[bl.PreferenceData, np.ndarray, np.ndarray]:
    """The comparisons, each comparison's user, and Θ* (d_x × A, reward of model a for context x)."""
    rng = np.random.default_rng(seed)
    answers = (rng.random((USERS, FEATURES - 1)) < rng.uniform(0.1, 0.6, FEATURES - 1)).astype(float)
    x_users = np.column_stack([np.ones(USERS), answers])
    theta = rng.standard_normal((FEATURES, RANK)) @ rng.standard_normal((RANK, MODELS))
    theta[:, 0] = 0.0  # rewards relative to the first model
    theta /= (x_users @ theta).std()
    user = np.repeat(np.arange(USERS), PER_USER)
    popularity = 1.0 / np.arange(1, MODELS + 1) ** 0.5
    popularity /= popularity.sum()
    first = rng.choice(MODELS, user.size, p=popularity)
    second = (first + rng.integers(1, MODELS, user.size)) % MODELS
    x = x_users[user]
    eta = np.einsum("tk,tk->t", x, (theta[:, first] - theta[:, second]).T)
    labels = (rng.random(user.size) < expit(eta)).astype(float)
    labels[rng.random(user.size) < TIES] = 0.5
    names = [f"model-{a:02d}" for a in range(MODELS)]
    contexts = ["intercept", *[f"answer{j:02d}" for j in range(1, FEATURES)]]
    phi = np.eye(MODELS)[:, 1:]  # the first model's column dropped: rewards relative to it
    data = bl.PreferenceData.from_items(labels, item_1=first, item_0=second, item_features=phi, contexts=x,
                                        item_names=names, context_names=contexts, feature_names=names[1:])
    return data, np.array([f"user{u}" for u in user]), theta[:, 1:]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="prism_bench.csv")
    parser.add_argument("--figure", default=None)
    args = parser.parse_args(argv)
    data, users, truth = generate()
    times = {}
    start = time.perf_counter()
    fit = bl.fit_prs(data, RANK)
    times["fit_prs"] = time.perf_counter() - start
    start = time.perf_counter()
    wald = fit.calibrated_set(0.95)
    times["Wald set (95%)"] = time.perf_counter() - start
    start = time.perf_counter()
    cv = bl.cross_validate(data, lambda d: bl.fit_prs(d, RANK), folds=5, groups=users)
    times["cross_validate PRS (5 folds by user)"] = time.perf_counter() - start
    start = time.perf_counter()
    cv_bt = bl.cross_validate(data, bl.fit_bradley_terry, folds=5, groups=users)
    times["cross_validate plain BT"] = time.perf_counter() - start
    road = times["fit_prs"] + times["Wald set (95%)"] + times["cross_validate PRS (5 folds by user)"]
    error = float(np.linalg.norm(fit.theta - truth) / np.linalg.norm(truth))
    table = pd.DataFrame({"stage": list(times), "seconds": list(times.values())})
    table.loc[len(table)] = ["contextual road (fit + set + CV)", road]
    table.to_csv(args.out, index=False)
    print(f"N = {data.n}, users = {USERS}, d_x = {data.d_x}, models = {MODELS}, k_eff = {wald.effective_dim}")
    print(table.to_string(index=False))
    print(f"relative error of Θ̂: {error:.3f}; held-out log-loss PRS {cv.mean['log_loss']:.4f} ± "
          f"{cv.std_err['log_loss']:.4f}, plain BT {cv_bt.mean['log_loss']:.4f} ± "
          f"{cv_bt.std_err['log_loss']:.4f}")
    if args.figure:
        _figure(fit.theta, truth, data, times, args.figure)


def _figure(theta: np.ndarray, truth: np.ndarray, data: bl.PreferenceData, times: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(15, 5), layout="constrained")
    left, right = fig.subfigures(1, 2, width_ratios=[1.6, 1])
    axes = left.subplots(1, 2, sharey=True)
    limit = float(np.abs(truth).max())
    for ax, values, title in ((axes[0], truth, r"$\Theta^*$ (truth)"),
                              (axes[1], theta, r"$\hat\Theta$ (fit_prs, rank 2)")):
        image = ax.imshow(values, cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto")
        ax.set_title(title)
        ax.set_xlabel("model (reward relative to model-00)")
    ticks = range(0, data.d_x, 5)
    axes[0].set_yticks(ticks, [data.context_names[j] for j in ticks], fontsize=8)
    axes[0].set_ylabel("survey feature")
    left.colorbar(image, ax=axes, shrink=0.8, label="reward weight")
    ax = right.subplots()
    labels = {"fit_prs": "fit_prs (rank 2)", "Wald set (95%)": "Wald set (95%)",
              "cross_validate PRS (5 folds by user)": "PRS, 5-fold CV by user",
              "cross_validate plain BT": "plain BT, 5-fold CV by user"}
    ax.barh([labels[s] for s in times], list(times.values()), color="tab:blue")
    ax.invert_yaxis()
    ax.set_xlabel("seconds (wall, 2 cores)")
    ax.set_title(f"N = {data.n:,} comparisons, {USERS:,} users")
    fig.savefig(path, dpi=110)
    print(f"figure: {path}")


if __name__ == "__main__":
    main()
