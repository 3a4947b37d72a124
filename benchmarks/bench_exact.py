"""The exact pessimistic solver against a generic conic solve of the same problem.

Paper simulation (d_x = 20, d_a = 10, d_s = 20, r = 3, N = 10,000), Wald 90% set in
the k = 138 RTV coordinates. The reference is the epigraph form
min Σ_i w_i t_i s.t. t_i ≥ θᵀz_ia, ‖θ − θ̂‖_W ≤ R, solved by cvxpy + Clarabel.
"""

import cvxpy as cp
from _timing import best_of

import bayes_loco as bl
from bayes_loco.policy import candidate_features


def reference(cs, z):
    n = z.shape[0]
    u = cp.Variable(cs.factor.shape[1])
    theta = cs.center + cs.radius * cs.factor @ u
    t = cp.Variable(n)
    values = z.reshape(-1, z.shape[-1]) @ theta
    cons = [cp.norm(u) <= 1, cp.reshape(values, (n, z.shape[1]), order="C") <= t[:, None]]
    prob = cp.Problem(cp.Minimize(cp.sum(t) / n), cons)
    prob.solve(solver=cp.CLARABEL)
    return prob.value


def main():
    problem = bl.simulate.paper_problem(rank=3, imbalance=3, seed=0)
    fit = bl.fit_prs(problem.sample(10000, seed=1), rank=3)
    cs = fit.calibrated_set(0.9)
    print(f"{'units':>6} {'exact s':>8} {'cvxpy s':>8} {'ratio':>7} {'value':>9} {'cvxpy value':>11} "
          f"{'rel gap':>8}")
    for n_units in (500, 2000, 10000):
        pop = problem.population(n_units, seed=2)
        ours, policy = best_of(lambda pop=pop: bl.pessimistic_policy(cs, pop, objective="exact"), repeat=2)
        if n_units <= 2000:
            z = candidate_features(cs, pop)
            ref, value = best_of(lambda z=z: reference(cs, z), repeat=1)
            ref_text, ratio, val = f"{ref:8.2f}", f"{ref / ours:6.1f}x", f"{value:11.6f}"
        else:
            ref_text, ratio, val = f"{'-':>8}", f"{'-':>7}", f"{'-':>11}"
        print(f"{n_units:>6} {ours:8.2f} {ref_text} {ratio} {policy.pessimistic_value:9.6f} {val} "
              f"{policy.certificate.relative_gap:8.1e}")


if __name__ == "__main__":
    main()
