"""The factored model sampled in identified coordinates: same prior, same likelihood, no ridges.

The factored posterior of (U, V) is invariant under U → U R, V → V R (R
orthogonal) and nearly so under U → U A, V → V A⁻ᵀ: a curved ridge whose
length is the factors' scale while its width shrinks like 1/√N, so NUTS needs
O(√N) leapfrog steps per draw however its mass matrix is tuned. This module
samples the same posterior of Θ in coordinates without those ridges
(docs/design.md, "The chart parametrisation").

**Spans.** Let P (d_x × d_x') be an orthonormal basis of the span of the
contexts x_t, Q (d_φ × m) one of the span of the differences Δφ_t, and P⊥, Q⊥
their complements. Write U = P U_s + P⊥ U_⊥ and V = Q V_s + Q⊥ V_⊥. The
likelihood reads U_s and V_s only, and the isotropic prior keeps the four
blocks independent, so U_⊥ and V_⊥ keep their N(0, s²) prior exactly in the
posterior. Within the spans, P and Q are rotated so that their first r
columns are the singular vectors of the start Θ̂.

**Chart.** Every rank-r Θ_s = U_s V_sᵀ whose column space meets the first r
coordinates of P regularly is

    Θ_s = [I; B] [A, C],   A (r × r), C (r × (m − r)), B ((d_x' − r) × r),

the k_c = r (d_x' + m − r) coordinates of the rank-r manifold (the RTV blocks
11, 12 and 21 are A, C and B A). The factors are recovered up to the group
GL(r) as U_s = [T; B T], V_sᵀ = T⁻¹ [A, C].

**The prior is unchanged.** Write the top block of U_s as G = T R with T lower
triangular with a positive diagonal and R orthogonal (an LQ decomposition).
The prior density is invariant under (U, V) → (U R, V R), so R can be
integrated out exactly; for Gaussian G, T_ii ~ s_U χ_(r−i+1) (i = 1 … r) and
the entries below the diagonal are N(0, s_U²) (Bartlett). Changing variables
from (T, H, V_s) to (T, B, A, C) with H = B T, V_sᵀ = T⁻¹ [A, C] multiplies
the density by abs(det T)^(d_x' − r − m). So in the coordinates (A, B, C, T, U_⊥,
V_⊥) the density is

    p ∝ ∏_i T_ii^(r − i + d_x' − r − m) · exp(−(‖T‖² + ‖B T‖²)/2s_U² − ‖T⁻¹[A, C]‖²/2s_V²)
        · N(U_⊥; 0, s_U²) · N(V_⊥; 0, s_V²) · L(y | Θ),

and the implied law of Θ = U Vᵀ is exactly that of the factored model
(:func:`~bayes_loco.bayes.build_model`): the same prior, the same likelihood.
``tests/test_bayes_chart.py`` checks the change of variables against a
finite-difference Jacobian and the posterior against the factored model's.

**Preconditioning.** The likelihood reads (A, B, C) only, whose posterior
shrinks like 1/√N while T's conditional law stays of order one. (A, B, C) is
sampled as c = c₀ + L⁻ᵀ z, with c₀ the start (A = diag(σ̂₁ … σ̂_r), B = C = 0)
and L Lᵀ the curvature of the negative log posterior there: the Fisher
information of the comparisons in chart coordinates plus the prior's
curvature with T held at diag(σ̂)^½. Where every component's column space
is determined, z is then close to N(0, I) and the tree depth does not grow with
N.

**Where it fails.** A component the data do not determine (a singular value
within noise of 0) has a near-uniform direction, and its column of B, a ratio
of Gaussians whose denominator (its row of A) is near 0, has Cauchy-like tails
that NUTS samples poorly. ``ChartFrame`` measures this at the start
(``angles``, ``determined_rank``).

**The partial chart.** So only the leading r₁ components that the data
determine (``chart_rank``) are charted, and the r_w = r − r₁ others stay
factored, where a weak component is a short ridge and its direction a Gaussian
vector rather than a ratio:

    Θ_s = [[A, C], [B A, B C + W Zᵀ]],

A (r₁ × r₁), C (r₁ × (m − r₁)), B ((d_x' − r₁) × r₁) as before, W
((d_x' − r₁) × r_w) and Z ((m − r₁) × r_w). Every rank-r Θ_s whose first r₁
rows have rank r₁ through A is of this form with B = Θ₂₁ A⁻¹ and W Zᵀ the
Schur complement Θ₂₂ − Θ₂₁ A⁻¹ C, unique up to W → W G, Z → Z G⁻ᵀ. On the
factors: rotate (U_s, V_s) so that the first r₁ rows of U_s are [T, 0], T
lower triangular with a positive diagonal (an LQ decomposition; the rotation
is integrated out, T_ii ~ s_U χ_(r−i+1)); write U_s = [[T, 0], [H₁, W]],
V_s = [V₁, [Y; Y']] with Y (r₁ × r_w). Then V₁ᵀ = T⁻¹ [A, C],
H₁ = (B − W Yᵀ A⁻¹) T and Y' = Z + Cᵀ A⁻ᵀ Y. The Jacobian is again
abs(det T)^(d_x' − r₁ − m) (block triangular), so in (A, B, C, T, W, Z, Y, U_⊥,
V_⊥) the density is

    p ∝ ∏_(i ≤ r₁) T_ii^(r − i + d_x' − r₁ − m) · exp(−(‖T‖² + ‖H₁‖² + ‖W‖²)/2s_U²
        − (‖V₁‖² + ‖Y‖² + ‖Y'‖²)/2s_V²) · N(U_⊥; 0, s_U²) · N(V_⊥; 0, s_V²) · L(y | Θ):

the factored model's prior and likelihood, exactly. r₁ = r is the chart
above.

**The weak block's coordinates.** The data read W and Z only through W Zᵀ, which
(W, Z, Y) → (W G, Z G⁻ᵀ, Y G⁻ᵀ), G ∈ GL(r_w), leaves unchanged: a fibre of r_w² dimensions along which
only the prior moves, while the data pin the directions across it to about 1/√N. In (W, Z) the fibre is
curved (Z shrinks as W grows), and NUTS's trajectories had to follow its bends: on the paper's q = 10 at
N = 20,000 (r₁ = 1, r_w = 2) the narrowest direction of the sampled posterior, against the draws' own
spread, was 848 times its widest. So V's weak columns are sampled as

    M = Z L,   N_Y = Y L,   L Lᵀ = WᵀW (Cholesky),

so that W Zᵀ = Q Mᵀ with Q = W L⁻ᵀ orthonormal. For G upper triangular, W → W G changes L to Gᵀ L and
leaves Q, M and N_Y as they are: that part of the fibre moves W alone, along a straight line, and no
datum sees it (H₁ reads W Yᵀ = Q N_Yᵀ). The map (Z, Y) → (M, N_Y) multiplies the density by
abs(det L)^(−m).

**Two funnels.** Where a weak component is noise the data hold its product near 0, not away from it,
and the posterior runs along W's scale a in that direction. In M the neck a → 0 is a funnel (M's scale,
the smaller of the data's sd and s a, shrinks with a) whose mass falls like a^d', d' = d_x' − r + 1 the
power at which the smallest singular value of a Gaussian (d_x' − r₁) × r_w matrix leaves 0; in (W, Z)
the tail a → ∞ is one (Z's scale sd / a) whose mass falls like a^(d' − m). So Z and Y are sampled
themselves wherever that tail falls, d' < m, and M where it does not, d' ≥ m (``ChartFrame.weak_product``):
there (W, Z)'s mass runs out along the fibre's bend (docs/design.md measures both).

**The weak block's rotation.** What remains of the fibre is the rotation (W, Z, Y) → (W R, Z R, Y R), R
∈ O(r_w), which leaves the density unchanged. For r_w ≥ 2 it is integrated out as T's is: the top r_w
rows of W̃ (below) are upper triangular, T_w = ``chart_weak_first`` (T_w,11, sampled as itself with
either sign: its Bartlett power is 0 and its sign is a reflection, which leaves Θ),
exp(``chart_weak_log_diag``) (T_w,ii, i ≥ 2) and ``chart_weak_upper`` above the diagonal, with
Bartlett's factor ∏ T_w,ii^(i − 1) (an RQ decomposition); the rows below are ``chart_weak_U``. Upper
triangular because W → W G with G upper triangular keeps that form: the gauge and the fibre's straight
part do not meet. For r_w = 1 the only rotation is a sign, W free. On the q = 10 chart above that ratio
fell from 848 to 33.

**The weak block's whitening.** W = M_W W̃ with M_W lower triangular, M_Wᵀ H_W M_W = I for H_W the
Fisher information of W's columns at the start averaged over them (``ChartFrame.weak_left_whitening``),
for data whose contexts are anisotropic; and each column of M as M_k = S_k M̃_k, S_kᵀ H_k S_k = I for H_k
M_k's curvature at the start, the Fisher information of the comparisons seen through Q's column k plus
the prior's (``ChartFrame.weak_whitening``): where some actions are rarely compared (the paper's
q = 10) that information is ~80× larger in one direction than in the others and lies across the frame's
axes, which NUTS's diagonal mass matrix cannot follow. N_Y and T are sampled in their own scale.

**The weak block's side.** x_tᵀ Θ δ_t = δ_tᵀ Θᵀ x_t, so the chart of Θᵀ, with the differences as
contexts, is a chart of the same posterior. Where the contexts' span is the larger (d_x' > m) and r_w ≥ 2
weak components each stand ``config["snr_transpose"]`` standard deviations or more from 0, a partial chart is
Θᵀ's (``ChartFrame.transposed``): the plane of W, whose direction mixes slowest, then lies in the
smaller span, and the larger span's weak directions are Z's columns, linear given W (d' < m there, so
Z itself). Where a weak component is nearer 0, Z's funnel (above) opens: such charts diverged.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pytensor.tensor.linalg import solve_triangular

from .._validation import check_int, check_rank
from ..config import get_config
from ..data import PreferenceData
from ..linalg import range_basis
from ..model import Ties, check_ties
from . import dims as D
from .margins import row_coords, row_layout
from .model import add_likelihood, model_coords, prior_scales
from .settings import Prior, settings_group
from .ties import tie_prior
from .whitening import weak_whitening
from .whitening import whitening as chart_whitening


@dataclass(frozen=True)
class ChartFrame:
    """The fixed frame of the chart parametrisation (see the module docstring).

    Attributes
    ----------
    left, left_null : ndarray
        P (d_x × d_x'), its first r columns Θ̂'s left singular vectors within the
        contexts' span, and P⊥ (d_x × (d_x − d_x')).
    right, right_null : ndarray
        Q (d_φ × m) and Q⊥ (d_φ × (d_φ − m)) for the differences' span.
    singular_values : ndarray, shape (r,)
        σ̂₁ ≥ … ≥ σ̂_r of P ᵀ Θ̂ Q (floored at ``config["singular_floor"]`` × σ̂₁).
    whitening : ndarray, shape (k_c, k_c)
        L⁻ᵀ: chart coordinates c = c₀ + L⁻ᵀ z.
    angles : ndarray, shape (r,)
        For each component, the root of the summed variances of its column of
        B under the Gaussian approximation L Lᵀ: about the angle (radians) to
        which the data fix its column space. See :attr:`determined`.
    snr : ndarray, shape (r,)
        Each σ̂_k over its Gauss–Newton standard deviation (that of A_kk under
        L Lᵀ): how many standard deviations the component stands from 0.
        :attr:`leading_snr` is the first.
    chart_rank : int or None
        r₁: the leading components sampled in chart coordinates, the others
        factored (the partial chart); None for all r.
    weak_whitening : ndarray, shape (r_w, m − r₁, m − r₁), or None
        With a partial chart, S_k for each weak column k of M (of Z where not
        :attr:`weak_product`): M_k = S_k M̃_k, with S_kᵀ H_k S_k = I for H_k the
        curvature of M_k at the start (see the module docstring).
    weak_left_whitening : ndarray, shape (d_x' − r₁, d_x' − r₁), or None
        With a partial chart, M_W, lower triangular: W = M_W W̃, with
        M_Wᵀ H_W M_W = I for H_W the curvature of W's columns at the start,
        averaged over them.
    transposed : bool
        The frame of Θᵀ on the comparisons read as δ_tᵀ Θᵀ x_t: ``left`` (and
        ``left_null``) then span the differences, ``right`` the contexts, and the chart's own
        dims named for the contexts count the differences' side. A partial chart is built so
        where the contexts' span is the larger and its weak components are determined
        (:func:`partial_frame`); :func:`build_chart_model` returns U and V the data's way round.
    """

    left: np.ndarray
    left_null: np.ndarray
    right: np.ndarray
    right_null: np.ndarray
    singular_values: np.ndarray
    whitening: np.ndarray
    angles: np.ndarray
    snr: np.ndarray
    chart_rank: int | None = None
    weak_whitening: np.ndarray | None = None
    weak_left_whitening: np.ndarray | None = None
    transposed: bool = False

    def __post_init__(self):
        if self.chart_rank is None:
            object.__setattr__(self, "chart_rank", self.rank)

    @property
    def rank(self) -> int:
        return self.singular_values.size

    @property
    def leading_snr(self) -> float:
        """σ̂₁ over its Gauss–Newton standard deviation: about the factored posterior's ridge length
        over its width for the leading component, which sets the factored sampler's leapfrog steps."""
        return float(self.snr[0])

    @property
    def nulls(self) -> tuple[np.ndarray, np.ndarray]:
        """(P⊥, Q⊥), the complements of the contexts' and the differences' spans, whichever side
        of the chart each lies on."""
        return (self.right_null, self.left_null) if self.transposed else (self.left_null, self.right_null)

    @property
    def weak_rank(self) -> int:
        """r_w = r − r₁, the trailing components left factored."""
        return self.rank - self.chart_rank

    @property
    def weak_product(self) -> bool:
        """Whether V's weak columns are sampled as M = Z L (True) or as Z (False): d_x' − r + 1 ≥ m
        (the module docstring's "two funnels")."""
        return self.left.shape[1] - self.rank + 1 >= self.right.shape[1]

    @property
    def dim(self) -> int:
        """k_c = r₁ (d_x' + m − r₁), the number of (whitened) chart coordinates."""
        return self.whitening.shape[0]

    @property
    def determined(self) -> bool:
        """Whether every component's column space is fixed to within ``config["angle_max"]`` radians.

        Where not, that column's chart coordinates (ratios of Gaussians) have Cauchy-like tails, which
        factored coordinates sample better: ``parametrization="auto"`` charts only :attr:`determined_rank`."""
        return bool(np.all(self.angles <= get_config()["angle_max"]))

    @property
    def determined_rank(self) -> int:
        """The number of leading components whose column space is fixed to within ``config["angle_max"]``."""
        loose = np.flatnonzero(self.angles > get_config()["angle_max"])
        return int(loose[0]) if loose.size else self.rank

    @property
    def chartable_rank(self) -> int:
        """The ``chart_rank`` that ``nuts.parametrization="auto"`` uses: the leading components
        that are determined (:attr:`determined_rank`) and stand ``config["snr_charted_min"]`` standard
        deviations or more from 0 (:attr:`snr`)."""
        r = self.determined_rank
        weak = np.flatnonzero(self.snr[:r] < get_config()["snr_charted_min"])
        return int(weak[0]) if weak.size else r

    @property
    def center(self) -> np.ndarray:
        """c₀: A = diag(σ̂₁ … σ̂_r₁), B = C = 0, packed as (vec A, vec C, vec B)."""
        c0 = np.zeros(self.dim)
        r = self.chart_rank
        c0[: r * r] = np.diag(self.singular_values[:r]).ravel()
        return c0

    def unpack(self, c):
        """(A, C, B) from the packed chart coordinates (NumPy or PyTensor)."""
        r, m, dx = self.chart_rank, self.right.shape[1], self.left.shape[1]
        a = c[: r * r].reshape((r, r))
        cc = c[r * r: r * m].reshape((r, m - r))
        b = c[r * m:].reshape((dx - r, r))
        return a, cc, b


def chart_frame(data: PreferenceData, theta_start: np.ndarray, rank: int, scale: float = 1.0,
                chart_rank: int | None = None) -> ChartFrame:
    """The frame of the chart around a start Θ̂ (the frequentist low-rank fit).

    Parameters
    ----------
    data : PreferenceData
    theta_start : ndarray, shape (d_x, d_φ)
        Θ̂: its singular vectors within the spans orient P and Q, and the
        preconditioner is the curvature at it.
    rank : int
        r; at most the dimension of each span.
    scale : float
        s of the prior (the prior part of the curvature).
    chart_rank : int or None
        r₁, 1 ≤ r₁ ≤ r: the leading components to chart (the partial chart of
        the module docstring); None for all r. The angles are those of the
        full chart either way.

    Raises
    ------
    ValueError
        r exceeds the dimension of the contexts' or the differences' span: the
        chart needs r independent directions on each side.

    Returns
    -------
    ChartFrame
        The spans' bases, the start's singular values, the whitening, and each
        component's angle and signal-to-noise ratio (what ``"auto"`` reads).

    Examples
    --------
    >>> frame = bl.bayes.chart_frame(data, fit.theta, 2)
    >>> frame.determined_rank, round(frame.leading_snr, 1)
    (1, 5.9)
    """
    if not isinstance(data, PreferenceData):
        raise TypeError(f"data must be a PreferenceData, got {type(data).__name__}")
    rank = check_rank(rank, data.d_x, data.d_phi)
    theta_start = np.asarray(theta_start, dtype=float)
    if theta_start.shape != (data.d_x, data.d_phi):
        raise ValueError(f"theta_start must have shape ({data.d_x}, {data.d_phi}), got {theta_start.shape}")
    chart_rank = rank if chart_rank is None else check_int(chart_rank, "chart_rank", 1, rank)
    frame = _full_frame(data, theta_start, rank, scale)
    return frame if chart_rank == rank else partial_frame(frame, data, chart_rank, scale)


def _full_frame(data: PreferenceData, theta_start: np.ndarray, rank: int, scale: float,
                transposed: bool = False) -> ChartFrame:
    """The full chart's frame around ``theta_start``, of Θᵀ (``theta_start`` then d_φ × d_x) where
    ``transposed``."""
    data = frame_data(data, transposed)
    p_span, p_null = range_basis(data.contexts)
    q_span, q_null = range_basis(data.differences)
    if rank > min(p_span.shape[1], q_span.shape[1]):
        raise ValueError(
            f"nuts.parametrization='chart' needs rank <= the dimension of the span of the contexts "
            f"({p_span.shape[1]}) and of the differences ({q_span.shape[1]}); got rank {rank}. Lower the "
            f"rank, or use nuts={{'parametrization': 'factored'}}")
    u, s, vt = np.linalg.svd(p_span.T @ theta_start @ q_span)
    left, right = p_span @ u, q_span @ vt.T
    sv = np.maximum(s[:rank], get_config()["singular_floor"] * max(s[0], np.finfo(float).tiny))
    theta0 = left[:, :rank] @ np.diag(sv) @ right[:, :rank].T
    whitening = chart_whitening(left, right, sv, theta0, data, scale)
    variances = np.sum(whitening**2, axis=1)  # diag of (L Lᵀ)⁻¹ = L⁻ᵀ L⁻¹
    angles = np.sqrt(variances[rank * right.shape[1]:].reshape(-1, rank).sum(axis=0))
    snr = sv / np.sqrt(variances[np.arange(rank) * (rank + 1)])  # A_kk sits at k r + k of vec A
    return ChartFrame(left, p_null, right, q_null, sv, whitening, angles, snr, transposed=transposed)


def frame_data(data: PreferenceData, transposed: bool) -> PreferenceData:
    """``data`` as a frame reads it: contexts and differences swapped where ``transposed``
    (x_tᵀ Θ δ_t = δ_tᵀ Θᵀ x_t), for the spans and the curvature only (each row's count and weight kept)."""
    if not transposed:
        return data
    return PreferenceData(data.differences, data.contexts, data.labels, copy=False, weights=data.weights,
                          counts=data.counts)


def partial_frame(frame: ChartFrame, data: PreferenceData, chart_rank: int, scale: float = 1.0) -> ChartFrame:
    """``frame`` (of the full chart) charting only its leading ``chart_rank`` components.

    The spans, singular values and angles are kept, and only the whitening of the charted
    (A, B, C) is computed (a caller that has read the full frame's angles need not build it
    again), but where the contexts' span is the larger and the weak block holds two or more
    components, each ``config["snr_transpose"]`` standard deviations or more from 0: there the frame is Θᵀ's
    (:attr:`ChartFrame.transposed`), so that the weak block's plane W lies in the smaller span.
    """
    chart_rank = check_int(chart_rank, "chart_rank", 1, frame.rank)
    r, sv = frame.rank, frame.singular_values
    theta0 = frame.left[:, :r] @ np.diag(sv) @ frame.right[:, :r].T
    d_x, m = frame.left.shape[1], frame.right.shape[1]
    if frame.transposed:
        d_x, m = m, d_x
    # §5.1 at q = 10, N = 100,000 (d_x' = 20, m = 9, r₁ = 1, weak SNRs 6.7-8.7): Θᵀ's chart drew 2.1 and
    # 4.8 times the effective draws per gradient (docs/design.md, "The weak block's side").
    transposed = bool(d_x > m and frame.rank - chart_rank >= 2
                      and frame.snr[chart_rank:].min() >= get_config()["snr_transpose"])
    if transposed != frame.transposed:
        frame = _full_frame(data, theta0.T, r, scale, transposed=transposed)
        theta0 = theta0.T
    data = frame_data(data, frame.transposed)
    whitening = chart_whitening(frame.left, frame.right, sv[:chart_rank], theta0, data, scale)
    partial = dataclasses.replace(frame, whitening=whitening, chart_rank=chart_rank)
    right, left = weak_whitening(partial, data, theta0, scale) if partial.weak_rank else (None, None)
    return dataclasses.replace(partial, weak_whitening=right, weak_left_whitening=left)


def build_chart_model(data: PreferenceData, rank: int, frame: ChartFrame, *, prior=None, ties: Ties = "half",
                      store_margins: bool = False, context_names=None, feature_names=None,
                      group_rows: bool = False, span_only: bool = False) -> pm.Model:
    """The factored model of :func:`~bayes_loco.bayes.build_model` in (partial) chart coordinates.

    Same prior on Θ, same likelihood, same data containers and Deterministics (``U``, ``V``, ``theta``); the
    free variables are ``chart_z`` (z, k_c), ``chart_log_diag`` (log T_ii), ``chart_lower`` (T below its
    diagonal, when r₁ > 1), ``U_null`` and ``V_null`` (U_⊥, V_⊥, when a span is not the whole space), with a
    partial chart (``frame.chart_rank`` r₁ < r) ``chart_weak_U`` (W̃), ``chart_weak_V`` (M̃, or Z̃ where not
    ``frame.weak_product``), ``chart_weak_top`` (N_Y, or Y) and, for r_w ≥ 2, W̃'s top block T_w
    (``chart_weak_first``, ``chart_weak_log_diag``, ``chart_weak_upper``), and, with ``prior.hyper``,
    ``sigma_U`` and ``sigma_V``. U and V are one representative of each Θ's orbit (the rotation R
    integrated out).

    Parameters
    ----------
    data : PreferenceData
    rank : int
    frame : ChartFrame
        From :func:`chart_frame` on the same data.
    prior : Prior, dict or None
        As in :func:`~bayes_loco.bayes.build_model` (the balancing potential
        is rotation invariant and carries over).
    ties : {"half", "davidson"}
        The tie model, as in :func:`~bayes_loco.bayes.build_model`.
    store_margins, context_names, feature_names, group_rows
        As in :func:`~bayes_loco.bayes.build_model`.
    span_only : bool
        Leave U_⊥ and V_⊥ out: the spans' blocks alone, whose posterior is the whole
        model's marginal where ``prior.balance`` is 0 (:mod:`.nullspace` draws U_⊥, V_⊥);
        ``U``, ``V`` and ``theta`` are then their parts within the spans.

    Returns
    -------
    pymc.Model

    Examples
    --------
    >>> frame = bl.bayes.chart_frame(data, fit.theta, 2)
    >>> model = bl.bayes.build_chart_model(data, 2, frame)
    >>> sorted(v.name for v in model.free_RVs)
    ['V_null', 'chart_log_diag', 'chart_lower', 'chart_z']
    """
    if not isinstance(data, PreferenceData):
        raise TypeError(f"data must be a PreferenceData, got {type(data).__name__}")
    rank = check_rank(rank, data.d_x, data.d_phi)
    if not isinstance(frame, ChartFrame):
        raise TypeError(f"frame must be a ChartFrame, got {type(frame).__name__}")
    context_null, feature_null = frame.nulls
    d_x, d_phi = context_null.shape[0], feature_null.shape[0]
    if frame.rank != rank or (d_x, d_phi) != (data.d_x, data.d_phi):
        raise ValueError(f"frame is for rank {frame.rank} and (d_x, d_phi) = ({d_x}, {d_phi}); expected "
                         f"rank {rank} and ({data.d_x}, {data.d_phi})")
    prior = tie_prior(settings_group(prior, Prior, "prior"), check_ties(ties))
    if span_only and prior.balance > 0:
        raise ValueError("span_only needs prior.balance = 0: the balancing potential couples U_⊥, V_⊥")
    r, r1, rw = rank, frame.chart_rank, frame.weak_rank
    dx, m = frame.left.shape[1], frame.right.shape[1]
    layout = row_layout(data, rank, group_rows)
    coords = model_coords(data, rank, context_names=context_names, feature_names=feature_names)
    coords |= chart_coords(frame) | row_coords(layout)
    inputs = frame_inputs(frame)
    with pm.Model(coords=coords) as model:
        s_u, s_v = prior_scales(prior)
        s_left, s_right = (s_v, s_u) if frame.transposed else (s_u, s_v)  # the chart's sides' scales
        z = pm.Flat(D.CHART_Z, dims=D.CHART_COORD)
        a, c, b = frame.unpack(inputs["chart_center"] + pt.dot(inputs["chart_whitening"], z))
        log_diag = pm.Flat(D.CHART_LOG_DIAG, dims=D.CHART_RANK)
        t = pt.diag(pt.exp(log_diag))
        if r1 > 1:
            rows, cols = np.tril_indices(r1, -1)
            t = pt.set_subtensor(t[rows, cols], pm.Flat(D.CHART_LOWER, dims=D.RANK_PAIR))
        v_top = solve_triangular(t, pt.concatenate([a, c], axis=1), lower=True)  # V₁ᵀ = T⁻¹ [A, C]
        if rw:
            u_s, v_s, left_sq, log_gauge = _weak_block(inputs, a, b, c, t, v_top, rw, dx - r1 - rw,
                                                       frame.weak_product)
        else:
            h1 = pt.dot(b, t)
            u_s = pt.concatenate([t, h1], axis=0)
            v_s = v_top.T
            left_sq = pt.sum(t * t) + pt.sum(h1 * h1)
            log_gauge = 0.0
        # Bartlett's χ diagonal (r − i), the log transform (1) and the chart's Jacobian (d_x' − r₁ − m).
        powers = (r - 1 - np.arange(r1)) + 1 + (dx - r1 - m)
        log_prior = (pt.dot(powers, log_diag) + log_gauge - left_sq / (2 * s_left**2)
                     - pt.sum(v_s * v_s) / (2 * s_right**2))
        if prior.hyper:  # the Normal densities' normalising constants, which depend on s_U, s_V
            log_prior = log_prior - dx * r * pt.log(s_left) - m * r * pt.log(s_right)
        pm.Potential(D.CHART_PRIOR, log_prior)
        u, v = pt.dot(inputs["chart_left"], u_s), pt.dot(inputs["chart_right"], v_s)
        if frame.transposed:  # Θᵀ = U_c V_cᵀ: U = V_c, V = U_c
            u, v = v, u
        if context_null.shape[1] and not span_only:
            u = u + pt.dot(inputs["chart_context_null"],
                           pm.Normal(D.LEFT_NULL, 0.0, s_u, dims=(D.CONTEXT_NULL, D.RANK)))
        if feature_null.shape[1] and not span_only:
            v = v + pt.dot(inputs["chart_feature_null"],
                           pm.Normal(D.RIGHT_NULL, 0.0, s_v, dims=(D.FEATURE_NULL, D.RANK)))
        u = pm.Deterministic(D.LEFT, u, dims=(D.CONTEXT, D.RANK))
        v = pm.Deterministic(D.RIGHT, v, dims=(D.FEATURE, D.RANK))
        add_likelihood(data, u, v, prior, ties, store_margins, layout)
    return model


def _weak_block(inputs: dict, a, b, c, t, v_top, rw: int, rest_rows: int, product: bool):
    """Inside a model context: (U_s, V_s, ‖T‖² + ‖H₁‖² + ‖W‖², the log density the weak block's
    coordinates add) of a partial chart.

    W = M_W W̃ and V's weak columns from M and N_Y: Z = M L⁻¹, Y = N_Y L⁻¹ with L Lᵀ = WᵀW where
    ``product`` (the module docstring's "weak block's coordinates"), else Z and Y themselves (M_k = S_k M̃_k
    then whitens Z_k), joined to the charted (A, B, C) and T.
    """
    w, log_gauge = _weak_left(rw, rest_rows)
    w = pt.dot(inputs["chart_weak_left_whitening"], w)  # W = M_W W̃
    y_top = pm.Flat(D.CHART_WEAK_TOP, dims=(D.CHART_RANK, D.WEAK_RANK))
    z_w = pm.Flat(D.CHART_WEAK_RIGHT, dims=(D.FEATURE_REST, D.WEAK_RANK))
    z_w = pt.stack([pt.dot(inputs["chart_weak_whitening"][k], z_w[:, k]) for k in range(rw)], axis=1)
    if product:
        chol = pt.linalg.cholesky(pt.dot(w.T, w))
        z_w = solve_triangular(chol.T, z_w.T, lower=False).T  # Z = M L⁻¹
        y_top = solve_triangular(chol.T, y_top.T, lower=False).T  # Y = N_Y L⁻¹
        m_all = y_top.shape[0] + z_w.shape[0]
        log_gauge = log_gauge - m_all * pt.sum(pt.log(pt.diag(chol)))
    a_y = pt.linalg.solve(a.T, y_top)  # A⁻ᵀ Y
    y_rest = z_w + pt.dot(c.T, a_y)
    h1 = pt.dot(b - pt.dot(w, a_y.T), t)
    u_s = pt.concatenate([pt.concatenate([t, pt.zeros_like(y_top)], axis=1),  # [[T, 0], [H₁, W]]
                          pt.concatenate([h1, w], axis=1)], axis=0)
    v_s = pt.concatenate([v_top.T, pt.concatenate([y_top, y_rest], axis=0)], axis=1)
    return u_s, v_s, pt.sum(t * t) + pt.sum(h1 * h1) + pt.sum(w * w), log_gauge


def _weak_left(rw: int, rest_rows: int):
    """Inside a model context: W̃, and the log density its gauge adds (see the module docstring).

    With r_w ≥ 2 the top r_w rows of W̃ are upper triangular, log T_w,ii free for i ≥ 2 and the first
    entry free itself (its sign a reflection): the rotation W → W R, Z → Z R, Y → Y R is integrated
    out, Bartlett's χ powers i − 1 plus 1 for each log.
    """
    if rw == 1:
        return pm.Flat(D.CHART_WEAK_LEFT, dims=(D.CONTEXT_REST, D.WEAK_RANK)), 0.0
    log_diag = pm.Flat(D.CHART_WEAK_LOG_DIAG, dims=D.WEAK_LEAD)
    first = pm.Flat(D.CHART_WEAK_FIRST)
    rows, cols = np.triu_indices(rw, 1)
    upper = pm.Flat(D.CHART_WEAK_UPPER, dims=D.WEAK_PAIR)
    diag = pt.concatenate([first[None], pt.exp(log_diag)])
    top = pt.set_subtensor(pt.diag(diag)[rows, cols], upper)
    if rest_rows:
        rest = pm.Flat(D.CHART_WEAK_LEFT, dims=(D.CONTEXT_WEAK_REST, D.WEAK_RANK))
        top = pt.concatenate([top, rest], axis=0)
    return top, pt.dot(np.arange(2, rw + 1), log_diag)


def chart_coords(frame: ChartFrame) -> dict:
    """The coordinates of the chart's own dims (:mod:`.dims`), beside :func:`~.model.model_coords`'s."""
    r1, rw = frame.chart_rank, frame.weak_rank
    coords = {D.CHART_COORD: np.arange(frame.dim), D.CHART_RANK: np.arange(r1),
              D.RANK_PAIR: np.arange(r1 * (r1 - 1) // 2),
              D.CONTEXT_NULL: np.arange(frame.nulls[0].shape[1]),
              D.FEATURE_NULL: np.arange(frame.nulls[1].shape[1])}
    if rw:
        coords |= {D.WEAK_RANK: np.arange(rw), D.WEAK_LEAD: np.arange(rw - 1),
                   D.CONTEXT_REST: np.arange(frame.left.shape[1] - r1),
                   D.CONTEXT_WEAK_REST: np.arange(frame.left.shape[1] - r1 - rw),
                   D.WEAK_PAIR: np.arange(rw * (rw - 1) // 2),
                   D.FEATURE_REST: np.arange(frame.right.shape[1] - r1)}
    return coords


def frame_inputs(frame: ChartFrame) -> dict:
    """The frame's arrays as named shared inputs of the model graph.

    Not constants: a compiled model of one shape then serves every data set of that
    shape, its frame swapped in with the data (:mod:`.samplers`).
    """
    arrays = {"chart_center": frame.center, "chart_whitening": frame.whitening, "chart_left": frame.left,
              "chart_right": frame.right, "chart_context_null": frame.nulls[0],
              "chart_feature_null": frame.nulls[1]}
    if frame.weak_whitening is not None:
        arrays |= {"chart_weak_whitening": frame.weak_whitening,
                   "chart_weak_left_whitening": frame.weak_left_whitening}
    return {name: pytensor.shared(np.ascontiguousarray(value, dtype=float), name=name)
            for name, value in arrays.items()}
