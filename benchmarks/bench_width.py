"""Pessimism at reward-model width: the value family against the exact Wald policy, in one run.

The problem of ``bench_scale.py --target width``: d_x = 32, d_φ = 4,096 (the paper's simulation
with 4,067 pure-noise feature dimensions), r = 4 (k = 16,496), N comparisons (default 100,000),
2,000 units × 10 actions, the §5.1 Θ*, q = 3. The stages both pipelines share (FGD, PRS's
reduced MLE, the Fisher information and its factorisation: the 90% Wald set) run once; then

- today's pipeline: the exact pessimistic policy of the Wald set;
- the value family's: ``bl.value_family(wald, population)`` (the population's 18,000 row ×
  action values; se from the whitened members, c the 90% quantile of max |t| from 10,000
  draws) and its relaxed policy;
- the row-space certificate's: FGD on the first half (``--max-iter`` iterations, 100 by default)
  chooses four candidates, a rank-4 fit of the third quarter gives the row space and the last
  quarter bounds them (``split_policy(..., model="row-space")``'s steps); it shares nothing with
  the two others.

Each stage prints its seconds and its own peak resident memory (the kernel's high-water mark,
reset before the stage: ``/proc/self/clear_refs``), and each pipeline its total and its peak.
Nothing after the timed stages is timed: the policies are then scored against the truth
(sub-optimality, improvement over the reference action, share of rows at the reference, and
whether the reported bound held), with the greedy policy of PRS's estimate as the yardstick,
the family's coverage of the true values and of θ*_rtv's, and its radius frontier (the relaxed
policy at fixed critical values c).

With ``--certified`` it runs the split road instead (:func:`bayes_loco.split_policy`'s steps, each
timed: PRS with the first half for FGD and the second for the reduced MLE, that MLE's 90% Wald set,
the four candidates' certificate) on the same data and population, and scores each candidate's bound
against its true value and against the value of the truth in the fit's reduced coordinates.

    .venv/bin/python benchmarks/bench_width.py                  # about 15 minutes, 9 GB
    .venv/bin/python benchmarks/bench_width.py --n 20000 --d-phi 1024   # a smaller run
    .venv/bin/python benchmarks/bench_width.py --certified      # about 80 minutes of one core
    .venv/bin/python benchmarks/bench_width.py --row-space --seed $(seq 0 19)    # 4 minutes a seed
    .venv/bin/python benchmarks/bench_width.py --row-space --n 4000 --d-phi 200 --units 200 --seed $(seq 0 11)

With ``--row-space`` the second half certifies in a row space fitted on half of it
(:func:`bayes_loco.certify.certify_row_space`: 128 coordinates A on the last quarter instead of the
reduced model's 16,496 on the second half).
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
from bench_scale import machine

import bayes_loco as bl

FRONTIER = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0)
STATUS = Path("/proc/self/status")
CLEAR_REFS = Path("/proc/self/clear_refs")


def high_water_gib() -> float:
    """The process's peak resident memory since the last :func:`reset_high_water` (VmHWM)."""
    for line in STATUS.read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024**2
    raise RuntimeError("no VmHWM in /proc/self/status")


def reset_high_water() -> None:
    """Reset the peak to the current resident memory (Linux ≥ 4.0: write 5 to clear_refs)."""
    CLEAR_REFS.write_text("5")


def stage(name: str, make, log: dict):
    """Run ``make()``, printing and recording its seconds and its own peak memory."""
    reset_high_water()
    start = time.perf_counter()
    out = make()
    seconds, peak = time.perf_counter() - start, high_water_gib()
    log[name] = (seconds, peak)
    print(f"{name:>22}: {seconds:8.1f} s   peak {peak:5.1f} GiB", flush=True)
    return out


def run(n: int, d_phi: int, units: int, draws: int, max_iter: int) -> None:
    print(machine(), flush=True)
    problem = bl.simulate.paper_problem(d_x=32, d_s=20, noise_dims=d_phi - 29, rank=4, imbalance=3)
    log: dict[str, tuple[float, float]] = {}
    data = stage("data (not timed)", lambda: problem.sample(n, seed=1), log)
    population = problem.population(units, seed=2)
    fgd = stage("FGD", lambda: bl.fit_low_rank(data, 4, ridge=1.0), log)
    prs = stage("PRS reduced MLE", lambda: bl.fit_prs(data, 4, ridge=1.0, low_rank=fgd), log)
    information = stage("Fisher information", prs._information, log)
    wald = stage("Wald set", lambda: bl.wald_set(prs.estimate, information, 0.9, prs.coordinates,
                                                 overwrite=True), log)
    family = stage("value family", lambda: bl.value_family(wald, population, draws=draws), log)
    relaxed = stage("family policy", lambda: bl.pessimistic_policy(family, population), log)
    exact = stage("exact policy", lambda: bl.pessimistic_policy(wald, population, objective="exact"), log)
    first, rest = data.split(n // 2)
    choosing = stage("FGD, first half", lambda: bl.fit_low_rank(first, 4, ridge=1.0, max_iter=max_iter), log)
    certificate = stage("row-space certificate",
                        lambda: bl.certify.certify_row_space(choosing, rest, population, 0.9), log)
    shared = ["FGD", "PRS reduced MLE", "Fisher information", "Wald set"]
    pipelines = {"today (exact Wald policy)": [*shared, "exact policy"],
                 "value family": [*shared, "value family", "family policy"],
                 "certified in a row space": ["FGD, first half", "row-space certificate"]}
    totals = {}
    for name, stages in pipelines.items():
        seconds = sum(log[s][0] for s in stages)
        peak = max(log[s][1] for s in ["data (not timed)", *stages])
        totals[name] = (seconds, peak)
        print(f"{name}: {seconds:.0f} s, peak {peak:.1f} GiB = {peak * 2**30 / 1e9:.1f} GB")
    t_old, m_old = totals["today (exact Wald policy)"]
    for name in ("value family", "certified in a row space"):
        seconds, peak = totals[name]
        print(f"{name} / today: time {seconds / t_old:.2f}, peak memory {peak / m_old:.2f}")
    print(f"k = {prs.k}, k_eff = {wald.effective_dim}, Wald radius {wald.radius:.1f}; {family!r}; "
          f"Monte Carlo 95% interval of c {family.critical_low:.3f} .. {family.critical_high:.3f}")
    print(f"exact policy: {exact.status.value}, {exact.message}")
    score(problem, prs, wald, family, {"greedy (PRS's estimate)": bl.greedy_policy(prs.theta, population),
                                       "exact, Wald 90%": exact, "relaxed, value family 90%": relaxed,
                                       "certified, row space 90%": certificate.policy},
          population)


def run_certified(n: int, d_phi: int, units: int) -> None:
    """The split road: candidates from the first half's FGD fit, their bounds from the second half."""
    print(machine(), flush=True)
    problem = bl.simulate.paper_problem(d_x=32, d_s=20, noise_dims=d_phi - 29, rank=4, imbalance=3)
    log: dict[str, tuple[float, float]] = {}
    data = stage("data (not timed)", lambda: problem.sample(n, seed=1), log)
    population = problem.population(units, seed=2)
    fit = stage("split PRS", lambda: bl.fit_prs(data, 4, ridge=1.0, n_initial=n // 2), log)
    wald = stage("Wald set", lambda: fit.calibrated_set(0.9), log)
    candidates = bl.certify.gain_candidates(fit.low_rank.theta, population)
    cert = stage("certificate", lambda: bl.certify_policies(wald, candidates, population, 0.9), log)
    print(f"split road: {sum(v[0] for k, v in log.items() if k != 'data (not timed)'):.0f} s, peak "
          f"{max(v[1] for v in log.values()):.1f} GiB; k / N of the certifying fit "
          f"{fit.k / fit.estimation_data.n:.3f}; {cert!r}")
    in_fit = bl.certify.policy_moments(fit.coordinates, candidates, population) @ fit.basis.to_coordinates(
        problem.theta)
    print(f"{'candidate':>10} {'true':>8} {'θ*_rtv':>8} {'estimate':>9} {'se':>7} {'bound':>8} {'held':>5}")
    for j, candidate in enumerate(candidates):
        true = bl.relative_value(candidate, problem, population)
        print(f"{j:>10} {true:8.4f} {in_fit[j]:8.4f} {cert.estimate[j]:9.4f} {cert.scale[j]:7.4f} "
              f"{cert.lower[j]:8.4f} {bool(true >= cert.lower[j])!s:>5}")
    deployed = bl.relative_value(cert.policy, problem, population)
    print(f"deployed: improvement {deployed:.4f}, bound {cert.policy.pessimistic_value:.4f}, held "
          f"{bool(deployed >= cert.policy.pessimistic_value)}")


def score(problem, prs, wald, family, policies: dict, population) -> None:
    """Sub-optimality, improvement over the reference, bound held; the family's coverage and frontier."""
    rewards = problem.rewards(population)
    relative = rewards - rewards[:, :1]
    best = float(relative.max(axis=1).mean())
    greedy = float(bl.relative_value(policies["greedy (PRS's estimate)"], problem, population))
    print(f"optimal improvement over the reference action: {best:.4f}")
    print(f"{'policy':>28} {'subopt':>8} {'improvement':>12} {'/ greedy':>9} {'at ref':>7} "
          f"{'bound':>8} {'held':>5}")
    rows = list(policies.items()) + [(f"family at c = {c:g}", bl.pessimistic_policy(family.with_critical(c),
                                                                                     population))
                                     for c in FRONTIER]
    for name, policy in rows:
        gain = float(bl.relative_value(policy, problem, population))
        bound = policy.pessimistic_value
        held = "-" if np.isnan(bound) else str(bool(gain >= bound - 1e-12))
        print(f"{name:>28} {best - gain:8.4f} {gain:12.4f} {gain / greedy:9.2f} "
              f"{np.mean(policy.actions == 0):7.3f} {bound:8.4f} {held:>5}")
    theta_rtv = prs.basis.to_coordinates(problem.theta)
    print(f"family covers the true values: {family.covers(relative)}; θ*_rtv's: "
          f"{bool(family.contains(theta_rtv))}; θ*_rtv in the Wald set: {bool(wald.contains(theta_rtv))}")
    members = family.scale > 0
    print(f"members' standard errors: median {np.median(family.scale[members]):.3f}, "
          f"true values |r*(a) - r*(a_ref)|: median {np.median(np.abs(relative[members])):.3f}")


def run_row_space(n: int, d_phi: int, units: int, seed: int, max_iter: int) -> dict:
    """The split road certified in a row space fitted on other comparisons
    (``split_policy(..., model="row-space")``'s steps, each timed): FGD on the first half chooses the
    candidates; the certificate fits the row space V̂₂ on the next quarter and A in Θ = A V̂₂ᵀ on the
    last. Each candidate's bound is scored against its true value; the deployed policy against the
    greedy policy of FGD on all the data (where PRS without a split starts)."""
    print(machine(), flush=True)
    problem = bl.simulate.paper_problem(d_x=32, d_s=20, noise_dims=d_phi - 29, rank=4, imbalance=3, seed=seed)
    log: dict[str, tuple[float, float]] = {}
    data = stage("data (not timed)", lambda: problem.sample(n, seed=1 + 10 * seed), log)
    population = problem.population(units, seed=2 + 10 * seed)
    first, rest = data.split(n // 2)
    low = stage("FGD on the first half", lambda: bl.fit_low_rank(first, 4, ridge=1.0, max_iter=max_iter), log)
    cert = stage("row-space certificate (FGD on a quarter, A on a quarter)",
                 lambda: bl.certify.certify_row_space(low, rest, population, 0.9), log)
    print(f"row-space road: {sum(v[0] for k, v in log.items() if k != 'data (not timed)'):.0f} s, peak "
          f"{max(v[1] for v in log.values()):.1f} GiB; FGD iterations {low.diagnostics.n_iter}; {cert!r}")
    print(f"level meaning: {cert.level_meaning}")
    print(f"{'candidate':>10} {'true':>8} {'estimate':>9} {'se':>7} {'bound':>8} {'held':>5}")
    trues = np.array([bl.relative_value(candidate, problem, population) for candidate in cert.candidates])
    for j, true in enumerate(trues):
        print(f"{j:>10} {true:8.4f} {cert.estimate[j]:9.4f} {cert.scale[j]:7.4f} {cert.lower[j]:8.4f} "
              f"{bool(true >= cert.lower[j])!s:>5}")
    deployed = bl.relative_value(cert.policy, problem, population)
    whole = bl.fit_low_rank(data, 4, ridge=1.0, max_iter=max_iter)  # PRS without a split starts here
    greedy = bl.relative_value(bl.greedy_policy(whole.theta, population), problem, population)
    held = bool(deployed >= cert.policy.pessimistic_value)
    print(f"deployed: improvement {deployed:.4f} ({deployed / greedy:.0%} of the whole data's greedy policy, "
          f"{greedy:.4f}), bound {cert.policy.pessimistic_value:.4f}, held {held}", flush=True)
    return {"held": held, "all_held": bool((trues >= cert.lower).all()), "share": cert.row_space_share,
            "of_greedy": deployed / greedy, "certified": cert.chosen is not None,
            "ratio": float(np.median(cert.estimate / trues))}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--d-phi", type=int, default=4096)
    parser.add_argument("--units", type=int, default=2000)
    parser.add_argument("--draws", type=int, default=10_000,
                        help="Monte Carlo draws of max |t| (value_family's default)")
    parser.add_argument("--certified", action="store_true",
                        help="run the split road (split_policy's steps) instead of the two others")
    parser.add_argument("--row-space", action="store_true",
                        help="run the split road certified in the first half's row space instead")
    parser.add_argument("--seed", type=int, nargs="+", default=[0],
                        help="--row-space: the problems' seeds (data 1 + 10 seed, population 2 + 10 seed)")
    parser.add_argument("--max-iter", type=int, default=100,
                        help="FGD's iterations on the row-space road (its choosing fit; with --row-space "
                             "also the whole data's fit of the greedy policy it is compared with)")
    args = parser.parse_args()
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        if args.row_space:
            runs = [run_row_space(args.n, args.d_phi, args.units, seed, args.max_iter) for seed in args.seed]
            share = [r["of_greedy"] for r in runs]
            print(f"{len(runs)} seeds: deployed bound held in {sum(r['held'] for r in runs)}, every "
                  f"candidate's in {sum(r['all_held'] for r in runs)}; certified above the reference action "
                  f"in {sum(r['certified'] for r in runs)}; deployed improvement / greedy's, median "
                  f"{np.median(share):.2f} (min {min(share):.2f}); "
                  f"estimate / true value, median {np.median([r['ratio'] for r in runs]):.2f}; share of Θ̂ in "
                  f"V̂₂, median {np.median([r['share'] for r in runs]):.2f}")
        elif args.certified:
            run_certified(args.n, args.d_phi, args.units)
        else:
            run(args.n, args.d_phi, args.units, args.draws, args.max_iter)


if __name__ == "__main__":
    main()
