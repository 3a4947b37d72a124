"""Held-out prediction without a truth: user-grouped 5-fold CV of PRS, plain BT and the MLE.

Two problems with repeated users: the paper's §5.1 simulation and the PersonalLLM stand-in.
Both draw a fresh context x for every comparison; here ``--users`` contexts are drawn once and
each comparison is given one of them (its user), with labels redrawn from Θ* at that context,
so a user's comparisons share x as in PRISM or Arena. The folds split by user: every user's
comparisons are held out together, so the held-out users are unseen in training (LoRe's
"unseen users").

Methods, each refitted on every training fold:

- ``BT``: plain Bradley–Terry, one context (x = 1), Θ of shape 1 × d_φ: what arena-style
  leaderboards fit;
- ``MLE``: the unconstrained MLE of Θ (d_x × d_φ entries), the paper's full-rank baseline;
- ``PRS``: the paper's reduced MLE at the rank GIC selects on the training fold
  (:func:`bayes_loco.select_rank`).

For each method the table gives mean held-out log-loss, accuracy (ties count half) and Brier
score over the folds with standard errors, and the paired difference of log-loss to PRS (mean
over folds of BT − PRS and MLE − PRS, with the standard error of the fold differences).

    .venv/bin/python scripts/heldout_study.py --out docs/data/heldout        # ~5 min on 2 cores
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit

import bayes_loco as bl
from bayes_loco.datasets import personalllm_problem, write_standin
from bayes_loco.model import margins
from bayes_loco.simulate import paper_problem

METHODS = ("BT", "MLE", "PRS")


def with_users(problem, n: int, n_users: int, seed: int) -> tuple[bl.PreferenceData, np.ndarray]:
    """``n`` comparisons of ``problem`` among ``n_users`` users (a context each), labels from Θ* at them."""
    rng = np.random.default_rng(seed)
    base = problem.sample(n, seed=rng.integers(2**31))
    users = rng.integers(0, n_users, size=n)
    contexts = problem.sample(n_users, seed=rng.integers(2**31)).contexts[users]
    eta = margins(problem.theta, contexts, base.differences)
    labels = (rng.random(n) < expit(eta)).astype(np.int8)
    return bl.PreferenceData(contexts, base.differences, labels, base.actions), users


def fit_fn(method: str):
    """A function of the training data returning that method's fit."""
    if method == "BT":
        return bl.fit_bradley_terry
    if method == "MLE":
        return bl.fit_mle
    return lambda train: bl.fit_prs(train, bl.select_rank(train).rank)


def problems(users: int, n: int, seed: int, workdir: Path):
    """(name, data, groups) of the two problems."""
    paper = paper_problem(rank=3, imbalance=3, seed=seed)
    yield ("paper §5.1 (q = 3, r = 3)", *with_users(paper, n, users, seed + 1))
    train, test = workdir / "pllm-train.csv", workdir / "pllm-test.csv"
    write_standin(train, 400, seed)
    write_standin(test, 100, seed + 1)
    pllm = personalllm_problem(train, test, d_x=10, rank=3, seed=seed)
    yield ("PersonalLLM stand-in (r = 3)", *with_users(pllm, n, users, seed + 2))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3000, help="comparisons per problem")
    parser.add_argument("--users", type=int, default=300, help="users (distinct contexts) per problem")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="write <out>.csv (per fold) and <out>.md (the table)")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, data, groups in problems(args.users, args.n, args.seed, Path(tmp)):
            for method in METHODS:
                t0 = time.perf_counter()
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    cv = bl.cross_validate(data, fit_fn(method), folds=args.folds, groups=groups,
                                           seed=args.seed)
                loss, se = cv.mean["log_loss"], cv.std_err["log_loss"]
                print(f"{name:32s} {method:4s} log-loss {loss:.4f} ± {se:.4f}"
                      f"  ({time.perf_counter() - t0:.0f} s, {len(caught)} warnings)", flush=True)
                rows.append(cv.table.assign(problem=name, method=method, warnings=len(caught)))
    folds = pd.concat(rows, ignore_index=True)
    table = summarise(folds)
    print(markdown(table))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        folds.to_csv(args.out.with_suffix(".csv"), index=False)
        args.out.with_suffix(".md").write_text(markdown(table) + "\n")
    return 0


def summarise(folds: pd.DataFrame) -> pd.DataFrame:
    """Mean ± s.e. over folds per problem and method, and the paired log-loss difference to PRS."""
    out = []
    for (problem, method), part in folds.groupby(["problem", "method"], sort=False):
        prs = folds[(folds.problem == problem) & (folds.method == "PRS")].set_index("fold")["log_loss"]
        diff = part.set_index("fold")["log_loss"] - prs
        k = len(part)
        out.append({"problem": problem, "method": method,
                    "log-loss": part.log_loss.mean(), "s.e.": part.log_loss.std(ddof=1) / np.sqrt(k),
                    "accuracy": part.accuracy.mean(), "Brier": part.brier.mean(),
                    "Δ log-loss vs PRS": diff.mean(), "s.e. of Δ": diff.std(ddof=1) / np.sqrt(k)})
    return pd.DataFrame(out)


def markdown(table: pd.DataFrame) -> str:
    """The table as GitHub markdown, numbers to four decimals."""
    cells = [[f"{v:.4f}" if isinstance(v, float) else str(v) for v in row]
             for row in table.itertuples(index=False)]
    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in cells])


if __name__ == "__main__":
    raise SystemExit(main())
