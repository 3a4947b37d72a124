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

    bayes-loco heldout --out docs/data/heldout        # about 5 minutes on two cores
"""

from __future__ import annotations

import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit

from ..crossval import cross_validate
from ..data import PreferenceData
from ..datasets import personalllm_problem, write_standin
from ..frequentist import fit_bradley_terry, fit_mle, fit_prs, select_rank
from ..model import margins
from ..simulate import paper_problem

__all__ = ["markdown", "run", "summarise"]

METHODS = ("BT", "MLE", "PRS")


def _with_users(problem, n: int, n_users: int, seed: int) -> tuple[PreferenceData, np.ndarray]:
    """``n`` comparisons of ``problem`` among ``n_users`` users (a context each), labels from Θ* at them."""
    rng = np.random.default_rng(seed)
    base = problem.sample(n, seed=rng.integers(2**31))
    users = rng.integers(0, n_users, size=n)
    contexts = problem.sample(n_users, seed=rng.integers(2**31)).contexts[users]
    eta = margins(problem.theta, contexts, base.differences)
    labels = (rng.random(n) < expit(eta)).astype(np.int8)
    return PreferenceData(contexts, base.differences, labels, base.actions), users


def _fit_fn(method: str):
    """A function of the training data returning that method's fit."""
    if method == "BT":
        return fit_bradley_terry
    if method == "MLE":
        return fit_mle
    return lambda train: fit_prs(train, select_rank(train).rank)


def _problems(users: int, n: int, seed: int, workdir: Path):
    """(name, data, groups) of the two problems."""
    paper = paper_problem(rank=3, imbalance=3, seed=seed)
    yield ("paper §5.1 (q = 3, r = 3)", *_with_users(paper, n, users, seed + 1))
    train, test = workdir / "pllm-train.csv", workdir / "pllm-test.csv"
    write_standin(train, 400, seed)
    write_standin(test, 100, seed + 1)
    pllm = personalllm_problem(train, test, d_x=10, rank=3, seed=seed)
    yield ("PersonalLLM stand-in (r = 3)", *_with_users(pllm, n, users, seed + 2))


def run(n: int = 3000, users: int = 300, folds: int = 5, seed: int = 0, out: Path | None = None,
        progress=print) -> pd.DataFrame:
    """Cross-validate BT, the MLE and PRS on both problems, user-grouped; the table of :func:`summarise`.

    Parameters
    ----------
    n : int
        Comparisons per problem.
    users : int
        Users (distinct contexts) per problem.
    folds : int
        Folds of the user-grouped cross-validation.
    seed : int
        Seed of the problems, the users and the folds.
    out : Path, optional
        Write ``<out>.csv`` (one row per problem, method and fold) and ``<out>.md`` (the table).
    progress : callable
        Called with a line after each method's cross-validation.

    Returns
    -------
    pandas.DataFrame
        One row per problem and method: mean log-loss and its standard error over the folds,
        accuracy, Brier score, and the paired log-loss difference to PRS with its standard error.

    Examples
    --------
    >>> from bayes_loco.experiments import heldout
    >>> table = heldout.run(out=Path("docs/data/heldout"))      # doctest: +SKIP
    """
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, data, groups in _problems(users, n, seed, Path(tmp)):
            for method in METHODS:
                t0 = time.perf_counter()
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    cv = cross_validate(data, _fit_fn(method), folds=folds, groups=groups, seed=seed)
                loss, se = cv.mean["log_loss"], cv.std_err["log_loss"]
                progress(f"{name:32s} {method:4s} log-loss {loss:.4f} ± {se:.4f}"
                         f"  ({time.perf_counter() - t0:.0f} s, {len(caught)} warnings)")
                rows.append(cv.table.assign(problem=name, method=method, warnings=len(caught)))
    per_fold = pd.concat(rows, ignore_index=True)
    table = summarise(per_fold)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        per_fold.to_csv(out.with_suffix(".csv"), index=False)
        out.with_suffix(".md").write_text(markdown(table) + "\n")
    return table


def summarise(folds: pd.DataFrame) -> pd.DataFrame:
    """Mean ± s.e. over folds per problem and method, and the paired log-loss difference to PRS.

    Parameters
    ----------
    folds : pandas.DataFrame
        One row per problem, method and fold: ``problem``, ``method``, ``fold``, ``log_loss``,
        ``accuracy``, ``brier`` (the tables of :func:`bayes_loco.cross_validate`).

    Returns
    -------
    pandas.DataFrame
        One row per problem and method: log-loss and its standard error, accuracy, Brier score,
        and the mean over folds of the method's log-loss minus PRS's with its standard error.

    Examples
    --------
    >>> import pandas as pd
    >>> from bayes_loco.experiments import heldout
    >>> folds = pd.DataFrame({"problem": "p", "method": ["BT", "BT", "PRS", "PRS"], "fold": [0, 1, 0, 1],
    ...                       "log_loss": [0.7, 0.6, 0.5, 0.5], "accuracy": 0.6, "brier": 0.2})
    >>> heldout.summarise(folds)[["method", "log-loss", "Δ log-loss vs PRS"]].round(2).values.tolist()
    [['BT', 0.65, 0.15], ['PRS', 0.5, 0.0]]
    """
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
    """The table as GitHub markdown, numbers to four decimals.

    Parameters
    ----------
    table : pandas.DataFrame
        Any table, e.g. that of :func:`summarise`.

    Returns
    -------
    str
        A header line, a rule and a line per row.

    Examples
    --------
    >>> import pandas as pd
    >>> from bayes_loco.experiments import heldout
    >>> print(heldout.markdown(pd.DataFrame({"method": ["BT"], "log-loss": [0.65]})))
    | method | log-loss |
    |---|---|
    | BT | 0.6500 |
    """
    cells = [[f"{v:.4f}" if isinstance(v, float) else str(v) for v in row]
             for row in table.itertuples(index=False)]
    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in cells])
