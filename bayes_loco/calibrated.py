"""The calibrated pessimistic policy for a problem's sizes: the exact Wald policy or a row-space certificate.

Which calibrated policy certifies more depends on how many coordinates the reduced model has per
comparison, k / N with k = r(d_x + d_φ) − r² (docs/results/width.md). Where it is small the exact
policy of PRS's Wald set on all the data is the sharpest policy measured; where it is large (a reward
model's last layer, d_φ in the thousands) that set's radius √χ²(α, k) makes the exact policy play the
reference action everywhere, and the reduced MLE's values are inflated, while a policy chosen on half
the data and certified in a row space fitted on other comparisons held its bound
(:func:`~bayes_loco.certify.certify_row_space`). The choice reads only the sizes (N, d_x, d_φ, r),
never the comparisons' outcomes, so the policy it returns keeps its own level: no union bound is paid.
"""

from __future__ import annotations

from dataclasses import replace

from ._validation import LEVEL, check_int, check_level, check_rank
from .certify import split_policy
from .config import get_config
from .coordinates import manifold_dim
from .data import PreferenceData
from .frequentist import fit_prs
from .policy import Policy, pessimistic_policy
from .population import Population

__all__ = ["calibrated_policy"]


def calibrated_policy(data: PreferenceData, rank: int, population: Population, level: float = LEVEL, *,
                      ridge: float = 1.0, scope: str = "personalised", max_iter: int = 5000) -> Policy:
    """The calibrated pessimistic policy these sizes call for: exact under the Wald set, or certified.

    With k = r(d_x + d_φ) − r² the reduced model's coordinates and N the comparisons: where k / N is at
    most ``config["certify_dimension_ratio"]`` (0.05), PRS on all the data (:func:`~bayes_loco.fit_prs`)
    and the exact pessimistic policy of its level-α Wald set; above it, the policy that
    :func:`~bayes_loco.split_policy` with ``model="row-space"`` certifies (candidates chosen on the
    first half, their values bounded in a row space fitted on a third quarter, on the last quarter).
    Measured (docs/results/width.md): at d_φ = 40 and N = 100,000 (k / N = 0.003) this is the exact
    Wald policy, the sharpest calibrated policy there; at d_φ = 4,096 (k / N = 0.16) the row-space
    certificate, whose bound held in 20 of 20 seeds where the exact policy certified nothing.

    Parameters
    ----------
    data : PreferenceData
        In the order to split, should the certificate be chosen (shuffle first if the order carries
        anything).
    rank : int
        r.
    population : Population
        The population the policy is for.
    level : float
        α: the policy's bound holds with probability at least α (asymptotically).
    ridge : float
        λ of the fits, as in :func:`~bayes_loco.fit_prs`.
    scope : {"personalised", "global"}
    max_iter : int
        FGD's iterations (:func:`~bayes_loco.fit_low_rank`; at a reward model's width 100 choose about
        as well as a converged fit, in a fiftieth of the time).

    Returns
    -------
    Policy
        Its ``level_meaning`` starts with k / N and the road taken.

    Examples
    --------
    >>> bl.calibrated_policy(data, 2, pop, 0.9).level_meaning[:33]     # k = 16 coordinates, N = 300
    'k / N = 16 / 300 = 0.053 > 0.05: '
    >>> policy = bl.calibrated_policy(problem.sample(3000, seed=3), 2, pop, 0.9)
    >>> policy.objective, policy.level_meaning[:36]
    ('exact', 'k / N = 16 / 3,000 = 0.0053 ≤ 0.05: ')
    """
    if not isinstance(data, PreferenceData):
        raise TypeError(f"data must be a PreferenceData, got {type(data).__name__}")
    rank = check_rank(rank, data.d_x, data.d_phi)
    level = check_level(level)
    max_iter = check_int(max_iter, "max_iter", 1)
    k = manifold_dim(data.d_x, data.d_phi, rank)
    limit = get_config()["certify_dimension_ratio"]
    n = data.n_comparisons
    sizes = f"k / N = {k:,} / {n:,} = {k / n:.2g}"
    if k / n > limit:
        policy = split_policy(data, rank, population, level, ridge=ridge, scope=scope, model="row-space",
                              max_iter=max_iter).policy
        road = f"{sizes} > {limit:g}: certified in a row space fitted on other comparisons"
    else:
        fit = fit_prs(data, rank, ridge=ridge, max_iter=max_iter)
        policy = pessimistic_policy(fit.calibrated_set(level), population, objective="exact", scope=scope)
        road = f"{sizes} ≤ {limit:g}: the exact policy of PRS's Wald set"
    return replace(policy, level_meaning=f"{road}; {policy.level_meaning}")
