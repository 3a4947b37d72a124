"""Leaderboard-sized Chatbot Arena data: bayes_loco against arena-rank and choix, measured in the same run.

Battles in Arena's schema (``model_a``, ``model_b``, ``winner``, ``judge`` and the style counts
``sum_assistant_{a,b}_tokens``, ``header_count_*``, ``list_count_*``, ``bold_count_*`` as flat
columns), 150 models with skewed popularity (Zipf-like, exponent 0.8), 20 % ties, strengths
N(0, 0.8²) and four style effects, GENERATED with a fixed seed and written to Parquet once per N.
Each tool then runs in a fresh process (so its peak memory, ``ru_maxrss``, is its own):

- ``ours``: ``read_arena(path)``, ``fit_bradley_terry`` (ties as half a win), the 95 % leaderboard;
- ``arena``: ``pd.read_parquet`` + arena-rank 0.1.1 ``PairDataset.from_pandas`` + ``BradleyTerry``
  with its sandwich intervals (``compute_ratings_and_cis``);
- ``choix``: ``pd.read_parquet`` + choix ``opt_pairwise`` (ties dropped: choix has no tie), no intervals;
- ``ours-style`` / ``arena-style``: style control, ``read_arena(path, style=True)`` + ``fit_bradley_terry``
  against ``ContextualPairDataset`` + ``ContextualBradleyTerry(reg=0)`` on the same standardised
  style columns (no reweighting, so both fit the same likelihood).

Ratings are compared in log-odds, centred over the models; the gradient of the mean loss at
our estimate is reported per battle. arena-rank and choix are optional: a tool that is not
importable is skipped. Install them into the environment without their pins (arena-rank 0.1.1
pins ``numpy==2.3.3``, which would downgrade the environment's NumPy), e.g.::

    python -m pip install --no-deps arena-rank==0.1.1 choix jax==0.8.1 jaxlib==0.8.1 optax chex \\
        jaxtyping wadler_lindig ml_dtypes opt_einsum absl-py toolz
    python benchmarks/bench_arena.py --sizes 100000 1000000 3000000

Writes the table to ``--out`` (CSV) and prints it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

MODELS = 150
TIES = 0.2
STYLE_EFFECTS = np.array([0.25, 0.10, 0.05, 0.08])  # tokens, headers, lists, bold (per standardised unit)
STYLE_KEYS = ("sum_assistant_{}_tokens", "header_count_{}", "list_count_{}", "bold_count_{}")


def generate(n: int, seed: int = 0) -> pd.DataFrame:
    """``n`` battles in Arena's schema with known strengths (GENERATED, not Arena data)."""
    rng = np.random.default_rng(seed)
    popularity = 1.0 / np.arange(1, MODELS + 1) ** 0.8
    popularity /= popularity.sum()
    strength = rng.normal(0.0, 0.8, MODELS)
    a = rng.choice(MODELS, n, p=popularity)
    b = rng.choice(MODELS - 1, n, p=np.delete(popularity, 0) / popularity[1:].sum())
    b = np.where(b >= a, b + 1, b)  # never a model against itself
    counts = {}
    for key, scale in zip(STYLE_KEYS, (400.0, 2.0, 3.0, 4.0), strict=True):
        for side in "ab":
            counts[key.format(side)] = rng.poisson(scale, n)
    style = np.column_stack([(counts[k.format("a")] - counts[k.format("b")])
                             / (counts[k.format("a")] + counts[k.format("b")] + 1.0) for k in STYLE_KEYS])
    style = (style - style.mean(axis=0)) / style.std(axis=0)
    eta = strength[a] - strength[b] + style @ STYLE_EFFECTS
    u = rng.random(n)
    winner = np.where(u < TIES, "tie", np.where(rng.random(n) < 1 / (1 + np.exp(-eta)), "model_a", "model_b"))
    names = np.array([f"model-{i:03d}" for i in range(MODELS)])
    frame = pd.DataFrame({"model_a": names[a], "model_b": names[b], "winner": winner,
                          "judge": np.char.add("user", rng.integers(0, max(1, n // 10), n).astype(str))})
    return frame.assign(**counts)


def _peak_mb() -> float:
    """This process's peak resident memory: VmHWM, which starts afresh at exec (ru_maxrss keeps the
    parent's peak across fork and exec on Linux, so it would report the generator's memory)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_ours(path: str, style: bool) -> dict:
    import bayes_loco as bl
    from bayes_loco.datasets import read_arena

    start = time.perf_counter()
    dataset = read_arena(path, style=style)
    read = time.perf_counter() - start
    fit = bl.fit_bradley_terry(dataset.data)
    board = fit.leaderboard(0.95)
    total = time.perf_counter() - start
    data = fit.mle.data
    grad = np.abs(bl.model.score_matrix(bl.model.Likelihood.of(data).derivatives(
        bl.model.margins(fit.theta, data.contexts, data.delta))[1], data.contexts, data.delta)).max()
    phi = np.asarray(dataset.data.item_features)
    ratings = phi @ fit.utilities[: phi.shape[1]]
    ratings = dict(zip(dataset.data.item_names, ratings - ratings.mean(), strict=True))
    coeffs = list(fit.utilities[phi.shape[1]:])
    return {"read_s": read, "total_s": total, "rows_fitted": data.n, "grad_per_battle": grad / dataset.data.n,
            "ratings": ratings, "coeffs": coeffs, "peak_mb": _peak_mb(), "top": board.index[0]}


def run_arena(path: str, style: bool) -> dict:
    from arena_rank.models.bradley_terry import BradleyTerry
    from arena_rank.models.contextual_bradley_terry import ContextualBradleyTerry
    from arena_rank.utils.data_utils import ContextualPairDataset, PairDataset

    start = time.perf_counter()
    frame = pd.read_parquet(path)
    if style:
        cols = []
        for key in STYLE_KEYS:
            a, b = frame[key.format("a")].to_numpy(float), frame[key.format("b")].to_numpy(float)
            cols.append(key.format("diff"))
            frame[cols[-1]] = (a - b) / (a + b + 1.0)
        dataset = ContextualPairDataset.from_pandas(frame, cols, reweighted=False, normalize_features=True)
        model = ContextualBradleyTerry(dataset.n_competitors, len(cols), reg=0.0)
    else:
        dataset = PairDataset.from_pandas(frame)
        model = BradleyTerry(dataset.n_competitors)
    read = time.perf_counter() - start
    out = model.compute_ratings_and_cis(dataset, significance_level=0.05)
    ratings = (np.asarray(out["ratings"]) - model.init_rating) / model.alpha
    total = time.perf_counter() - start
    coeffs = list(np.asarray(out["coeffs"])) if style else []
    centred = dict(zip(dataset.competitors, ratings - ratings.mean(), strict=True))
    return {"read_s": read, "total_s": total, "ratings": centred,
            "coeffs": coeffs, "peak_mb": _peak_mb()}


def run_choix(path: str, style: bool) -> dict:
    import choix

    start = time.perf_counter()
    frame = pd.read_parquet(path, columns=["model_a", "model_b", "winner"])
    frame = frame[frame["winner"].isin(["model_a", "model_b"])]
    codes, names = pd.factorize(pd.concat([frame["model_a"], frame["model_b"]]), sort=True)
    n = len(frame)
    a, b = codes[:n], codes[n:]
    won = frame["winner"].to_numpy() == "model_a"
    pairs = np.column_stack([np.where(won, a, b), np.where(won, b, a)])
    read = time.perf_counter() - start
    params = choix.opt_pairwise(len(names), pairs)
    total = time.perf_counter() - start
    centred = dict(zip(names, params - params.mean(), strict=True))
    return {"read_s": read, "total_s": total, "ratings": centred,
            "coeffs": [], "peak_mb": _peak_mb()}


TOOLS = {"ours": (run_ours, False), "arena": (run_arena, False), "choix": (run_choix, False),
         "ours-style": (run_ours, True), "arena-style": (run_arena, True)}
IMPORTS = {"arena": "arena_rank", "arena-style": "arena_rank", "choix": "choix"}


def _available(tool: str) -> bool:
    module = IMPORTS.get(tool)
    if module is None:
        return True
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _child(tool: str, path: str, out: str) -> None:
    fn, style = TOOLS[tool]
    Path(out).write_text(json.dumps(fn(path, style), default=float))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1e5, 1e6])
    parser.add_argument("--tools", nargs="+", default=list(TOOLS), choices=list(TOOLS))
    parser.add_argument("--out", default="arena_bench.csv")
    parser.add_argument("--choix-max", type=float, default=1.5e6,
                        help="skip choix above this N (about 10 minutes per 10⁶ battles)")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(*args.child)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for size in args.sizes:
            n = int(size)
            path = os.path.join(folder, f"battles{n}.parquet")
            generate(n).to_parquet(path)
            results = {}
            for tool in args.tools:
                if not _available(tool) or (tool == "choix" and n > args.choix_max):
                    print(f"N={n:>9,} {tool:<12} skipped", flush=True)
                    continue
                out = os.path.join(folder, f"{tool}.json")
                subprocess.run([sys.executable, __file__, "--child", tool, path, out], check=True)
                results[tool] = json.loads(Path(out).read_text())
                print(f"N={n:>9,} {tool:<12} read {results[tool]['read_s']:.2f} s, total "
                      f"{results[tool]['total_s']:.2f} s, peak {results[tool]['peak_mb']:.0f} MB", flush=True)
            for tool, res in results.items():
                base = results.get("ours-style" if "style" in tool else "ours")
                keys = sorted(set(res["ratings"]) & set(base["ratings"])) if base else []
                gap = max(abs(res["ratings"][k] - base["ratings"][k]) for k in keys) if keys else math.nan
                if base and res["coeffs"]:
                    gap = max(gap, float(np.abs(np.subtract(res["coeffs"], base["coeffs"])).max()))
                row = {"N": n, "tool": tool, "read_s": res["read_s"], "total_s": res["total_s"],
                       "peak_mb": res["peak_mb"], "max_rating_gap_vs_ours": gap,
                       "grad_per_battle": res.get("grad_per_battle", math.nan),
                       "rows_fitted": res.get("rows_fitted", math.nan)}
                rows.append(row)
                cells = (f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items())
                print(", ".join(cells), flush=True)
    table = pd.DataFrame(rows)
    table.to_csv(args.out, index=False)
    print(table.to_string(index=False))


if __name__ == "__main__":
    main()
