"""fit_mle (Newton-CG, no Kronecker design) against statsmodels Logit on the explicit design.

The reference builds Z[t] = vec(x_t Δφ_tᵀ) (N × d_x·d_φ) and runs Newton; the timing of
the reference includes building Z, since fit_mle never needs it.
"""

import numpy as np
import statsmodels.api as sm
from _timing import best_of

import bayes_loco as bl


def problem(n, d_x, d_phi, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d_x))
    dphi = rng.normal(size=(n, d_phi))
    theta = rng.normal(scale=0.3, size=(d_x, d_phi))
    eta = np.einsum("ij,ij->i", x @ theta, dphi)
    y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int)
    return bl.PreferenceData(x, dphi, y)


def reference(data):
    z = (data.contexts[:, :, None] * data.differences[:, None, :]).reshape(data.n, -1)
    return sm.Logit(data.labels.astype(float), z).fit(method="newton", tol=1e-10, disp=0).params


def main():
    print(f"{'N':>7} {'d_x':>4} {'d_phi':>5} {'fit_mle s':>10} {'statsmodels s':>14} {'ratio':>7} "
          f"{'max|dΘ|':>9}")
    for n, d_x, d_phi in [(3000, 10, 10), (10000, 20, 29), (30000, 20, 29)]:
        data = problem(n, d_x, d_phi)
        ours, fit = best_of(lambda data=data: bl.fit_mle(data))
        ref, params = best_of(lambda data=data: reference(data))
        diff = np.abs(fit.theta.ravel() - params).max()
        print(f"{n:>7} {d_x:>4} {d_phi:>5} {ours:>10.3f} {ref:>14.3f} {ref / ours:>6.1f}x {diff:>9.1e}")


if __name__ == "__main__":
    main()
