"""The design stage's computations: what the comparisons and the candidates are in a fit's coordinates.

- :func:`design`: the N × k design (row t: z_t of x_t Δφ_tᵀ), refused when it does not fit;
  :func:`design_operator` the same as a linear operator in RTV coordinates, never formed.
- :func:`information`: Σ_t w_t z_t z_tᵀ (k × k) — the Gram matrix W (w_t = 1), the Fisher
  information (w_t = p̂_t(1 − p̂_t)) or a sandwich's meat — in any fit's coordinates, never
  forming the N × k design. Every fit's Gram and information matrices are this one function.
- :func:`identified_directions`: an orthonormal basis of range(W).
- :func:`candidate_features` and :func:`mean_candidate_features`: z(x_i, s_i, a) of a population's
  candidates relative to a reference action, and their mean over the units of a scope.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from scipy.linalg import blas
from scipy.sparse.linalg import LinearOperator

from ._validation import as_float_array, check_memory, check_real
from .config import get_config
from .coordinates import Coordinates, RTVBasis, VecCoordinates, check_coordinates
from .data import PreferenceData
from .linalg import range_mask
from .population import Population, Units

if TYPE_CHECKING:
    from .sets.base import UncertaintySet


def design(coordinates: Coordinates, data: PreferenceData) -> np.ndarray:
    """The N × k design of the comparisons in these coordinates: row t is z of x_t Δφ_tᵀ.

    Refused (``MemoryError``) when N × k does not fit in memory; :func:`information`
    and :func:`design_operator` give what is needed of it without forming it.
    """
    check_coordinates(coordinates, data.d_x, data.d_phi, "coordinates")
    check_memory(8.0 * data.n * coordinates.dim, f"the {data.n} x {coordinates.dim} design",
                 "use information or design_operator, which never form it")
    return coordinates.transform(data.contexts, data.differences)


def information(coordinates: Coordinates, data: PreferenceData, weights: np.ndarray | None = None
                ) -> np.ndarray:
    """Σ_t w_t z_t z_tᵀ (k × k) over the comparisons' coordinates; without ``weights`` the Gram matrix W.

    W is summed over the comparisons the rows stand for: w_t is a row's count f_t (1 without counts),
    so counted rows give the W of their expanded rows.

    The design is formed ``config["design_block_bytes"]`` at a time, so the memory is k² plus
    one block, never N × k (at LLM-width features N × k is 13 GB for N = 100,000). Each
    block updates the upper triangle only (BLAS ``dsyrk`` of √w_t z_t, or above
    ``config["gram_panel"]`` coordinates general products by column panels): about half the
    multiplications of a general product, which dominate at LLM width (N k² = 2.7·10¹³ at
    N = 100,000). In RTV coordinates above ``config["gram_panel"]`` it is summed from their Kronecker
    structure (:func:`_rtv_gram`); in vec(Θ) coordinates on the data's support only, by
    :func:`gram_rows` (the MLE baseline's rounding, which its Gram set keeps to the last digit).
    With ``weights`` p̂_t(1 − p̂_t) it is the Fisher information of a linear logit.
    Refused (``MemoryError``) when the k × k result does not fit in memory.
    """
    check_coordinates(coordinates, data.d_x, data.d_phi, "coordinates")
    weights = data.counts if weights is None else weights
    if weights is not None:
        weights = as_float_array(weights, "weights", 1)
        if weights.shape != (data.n,) or not np.all(weights >= 0):
            what = f"shape {weights.shape}" if weights.shape != (data.n,) else "some negative"
            raise ValueError(f"weights must be {data.n} nonnegative numbers (one per comparison), got {what}")
    if isinstance(coordinates, VecCoordinates):
        return _vec_information(coordinates, data, weights)
    if data.indexed and data.d_x * data.d_phi <= get_config()["indexed_vec_max"]:
        return _indexed_information(coordinates, data, weights)
    if isinstance(coordinates, RTVBasis) and coordinates.dim > get_config()["gram_panel"]:
        return _rtv_gram(coordinates, data, weights)  # checks the memory it needs itself
    return _blocked_gram(coordinates, data, weights)


def _indexed_information(coordinates: Coordinates, data: PreferenceData, weights: np.ndarray | None
                         ) -> np.ndarray:
    """:func:`information` of item-indexed data in any coordinates that are linear in x Δφᵀ: T G Tᵀ, with
    G = Σ_t w_t vec(x_t Δφ_tᵀ) vec(x_t Δφ_tᵀ)ᵀ summed by compared pair (:meth:`ItemDifferences.vec_gram`)
    and T the coordinates of the d_x·d_φ unit matrices e_c e_jᵀ: no N × k design."""
    w = np.ones(data.n) if weights is None else weights
    gram = data.delta.vec_gram(w, data.contexts)
    units = coordinates.transform(np.repeat(np.eye(data.d_x), data.d_phi, axis=0),
                                  np.tile(np.eye(data.d_phi), (data.d_x, 1)))
    out = units.T @ gram @ units
    return 0.5 * (out + out.T)


def gram_rows(z: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Σ_t w_t z_t z_tᵀ of the rows of a formed design z (N × k): zᵀz, or zᵀ diag(w) z.

    A fit whose design is already formed (PRS's reduced design, the chart's Jacobian rows) sums
    its information here; the Gram matrix is NumPy's zᵀz (a ``dsyrk``), the weighted one a general
    product, as the fits have always rounded them.
    """
    return z.T @ z if weights is None else z.T @ (weights[:, None] * z)


def _vec_information(coordinates: VecCoordinates, data: PreferenceData, weights: np.ndarray | None
                     ) -> np.ndarray:
    """:func:`information` in vec(Θ) coordinates, on the data's support (:attr:`PreferenceData.support`)
    and zero elsewhere: N × |support| blocks of the design instead of N × d_x·d_φ (at d_x × d_φ =
    100 × 50 in the paper's simulation, 900 columns instead of 5,000).

    Summed by :func:`support_gram`.
    """
    k = coordinates.dim
    rows, cols = data.support
    support = VecCoordinates(max(rows.size, 1), max(cols.size, 1))
    block = max(1, get_config()["design_block_bytes"] // (8 * support.dim))
    check_memory(8.0 * (k * k + support.dim * (support.dim + min(block, data.n))),
                 f"the {k} x {k} Gram matrix of the coordinates", "use the low-rank PRS fit at this size")
    full = np.zeros((k, k))
    if not (rows.size and cols.size):
        return full
    index = (rows[:, None] * data.d_phi + cols).ravel()
    full[np.ix_(index, index)] = support_gram(data, rows, cols, weights)
    return full


def support_gram(data: PreferenceData, rows: np.ndarray, cols: np.ndarray, weights: np.ndarray | None
                 ) -> np.ndarray:
    """Σ_t w_t z_t z_tᵀ with z_t = vec(x_t[rows] Δφ_t[cols]ᵀ): the information on entries (rows × cols) of Θ.

    Item-indexed data sum it by compared pair (Laplacians of the compared items); formed differences
    a block of ``config["design_block_bytes"]`` at a time by :func:`gram_rows` (the MLE baseline's
    arithmetic, on which its Gram set, and the demo's table, depend to the last digit). ``weights``
    are not checked: the fits pass their own curvatures here.
    """
    if data.indexed:
        c = np.ones(data.n) if weights is None else weights
        return data.delta.columns(cols).vec_gram(c, data.contexts[:, rows])
    support = VecCoordinates(rows.size, cols.size)
    block = max(1, get_config()["design_block_bytes"] // (8 * support.dim))
    inner = np.zeros((support.dim, support.dim))
    for lo in range(0, data.n, block):
        x, dphi = data.contexts[lo: lo + block], data.difference_rows(lo, lo + block)
        z = support.transform(x[:, rows], dphi[:, cols])
        inner += gram_rows(z, None if weights is None else weights[lo: lo + block])
    return inner


def _blocked_gram(coordinates: Coordinates, data: PreferenceData, weights: np.ndarray | None) -> np.ndarray:
    """:func:`information` in any coordinates: the design a block of rows at a time, upper triangles by
    ``dsyrk`` (or by column panels above ``config["gram_panel"]``), mirrored at the end."""
    k = coordinates.dim
    block = max(1, get_config()["design_block_bytes"] // (8 * k))
    check_memory(8.0 * k * (k + min(block, data.n)), f"the {k} x {k} Gram matrix of the coordinates",
                 "use fewer coordinates (a lower rank) or a machine with more memory")
    out = np.zeros((k, k), order="F") if k <= get_config()["gram_panel"] else None
    spans = [(lo, min(lo + get_config()["gram_panel"], k)) for lo in range(0, k, get_config()["gram_panel"])]
    panels = [np.zeros((hi, hi - lo), order="F") for lo, hi in spans] if out is None else []
    for lo in range(0, data.n, block):
        z = coordinates.transform(data.contexts[lo: lo + block], data.difference_rows(lo, lo + block))
        if weights is not None:
            z *= np.sqrt(weights[lo: lo + block])[:, None]
        if out is not None:
            # zᵀz is a·aᵀ for a = zᵀ, which is z's memory read in Fortran order: no copy.
            out = blas.dsyrk(1.0, z.T, beta=1.0, c=out, trans=0, lower=0, overwrite_c=1)
            continue
        # Above config["gram_panel"] coordinates, the upper triangle by column panels, each a general product
        # into its own Fortran array: the threaded dsyrk of the OpenBLAS in the NumPy and SciPy wheels
        # (0.3.34) writes out of bounds and crashes the process at k = 16,496 with 800 rows or more (seen on
        # an AVX-512 AMD EPYC), and panels of z's Fortran copy need no temporaries. The diagonal blocks'
        # lower halves (k·config["gram_panel"]/2 of k²/2 entries) are the only extra work.
        zf = np.asfortranarray(z)
        for j, (first, last) in enumerate(spans):
            panels[j] = blas.dgemm(1.0, zf[:, :last], zf[:, first:last], beta=1.0, c=panels[j], trans_a=1,
                                   overwrite_c=1)
    if out is None:
        out = np.empty((k, k), order="F")
        for j, (first, last) in enumerate(spans):
            out[:last, first:last], panels[j] = panels[j], None
    _mirror_upper(out)
    return out


def _rtv_gram(basis: RTVBasis, data: PreferenceData, weights: np.ndarray | None) -> np.ndarray:
    """:func:`information` in RTV coordinates from their Kronecker structure.

    Blocks 11 and 12 together are x̃₁ ⊗ f̃ (x̃ = Ûᵀx, f̃ = V̂ᵀΔφ, x̃₁ its first r entries), so their
    part of W is r² blocks Σ_t w_t x̃_tp x̃_tq f̃_t f̃_tᵀ (d_φ × d_φ), of which the r(r+1)/2 with p ≤ q
    are distinct and symmetric: N d_φ² r(r+1)/4 multiply-adds (upper triangles by column panels)
    where the generic sum over z takes N (r d_φ)²/2, 10/16 of it at r = 4 and about half as r grows.
    Block 21's rows and columns (r (d_x − r) of them) are general products.
    """
    r, dp, k = basis.rank, basis.d_phi, basis.dim
    n11, n12 = r * r, r * (dp - r)
    # Θ'[p, j] for p < r is θ_rtv[p r + j] (block 11, j < r) or θ_rtv[n11 + p (d_φ − r) + j − r] (block 12):
    # for each p, pairs (slice of θ_rtv, slice of j)
    lead = [((slice(p * r, (p + 1) * r), slice(0, r)),
             (slice(n11 + p * (dp - r), n11 + (p + 1) * (dp - r)), slice(r, dp))) for p in range(r)]
    tail = slice(n11 + n12, k)
    pairs = [(p, q) for p in range(r) for q in range(p, r)]
    panel = get_config()["pair_panel"]
    spans = [(lo, min(lo + panel, dp)) for lo in range(0, dp, panel)]
    # Every temporary of a block together (f̃ and its scaled copy, Δφ's rows, x̃, block 21 and its rooted
    # copy) stays within config["design_block_bytes"], so beyond one block the memory does not grow with N.
    per_row = 3 * dp + basis.d_x + 2 * (k - n11 - n12)
    rows = max(1, get_config()["design_block_bytes"] // (8 * per_row))
    check_memory(8.0 * (k * k + len(pairs) * sum(hi * (hi - lo) for lo, hi in spans) + dp * dp
                        + min(rows, data.n) * per_row),
                 f"the {k} x {k} Gram matrix of the coordinates and its {len(pairs)} partial sums",
                 "use fewer coordinates (a lower rank) or a machine with more memory")
    panels = {pair: [np.zeros((hi, hi - lo), order="F") for lo, hi in spans] for pair in pairs}
    across = np.zeros((r, dp, k - n11 - n12))
    corner = np.zeros((k - n11 - n12, k - n11 - n12))
    scaled = np.empty((min(rows, data.n), dp), order="F")
    for lo in range(0, data.n, rows):
        xt = data.contexts[lo: lo + rows] @ basis.left
        ft = (basis.right.T @ data.difference_rows(lo, lo + rows).T).T  # f̃ of the block, Fortran-ordered
        w = np.ones(xt.shape[0]) if weights is None else weights[lo: lo + rows]
        block21 = (xt[:, r:, None] * ft[:, None, :r]).reshape(xt.shape[0], -1)
        rooted = np.sqrt(w)[:, None] * block21
        corner += rooted.T @ rooted  # a symmetric rank update: W exactly symmetric
        part = scaled[: xt.shape[0]]
        for p, q in pairs:
            np.multiply(ft, (w * xt[:, p] * xt[:, q])[:, None], out=part)
            for j, (first, last) in enumerate(spans):
                panels[p, q][j] = blas.dgemm(1.0, ft[:, :last], part[:, first:last], beta=1.0,
                                             c=panels[p, q][j], trans_a=1, overwrite_c=1)
        for p in range(r):
            across[p] += ft.T @ ((w * xt[:, p])[:, None] * block21)
    out = np.empty((k, k), order="F")
    for p, q in pairs:
        m = np.empty((dp, dp), order="F")
        for j, (first, last) in enumerate(spans):
            m[:last, first:last] = panels[p, q][j]
        del panels[p, q]
        _mirror_upper(m)
        # M_pq = M_qp and each is symmetric: the (q, p) block is the same array, with no transposed copy
        for first, second in {(p, q), (q, p)}:
            for rows_w, rows_m in lead[first]:
                for cols_w, cols_m in lead[second]:
                    out[rows_w, cols_w] = m[rows_m, cols_m]
    for p in range(r):
        for rows_w, rows_m in lead[p]:
            out[rows_w, tail] = across[p][rows_m]
            out[tail, rows_w] = across[p][rows_m].T
    out[tail, tail] = corner
    return out


def _mirror_upper(a: np.ndarray) -> None:
    """Copy the upper triangle of a square array onto its lower one in place, a panel of rows at a time."""
    for lo in range(0, a.shape[0], get_config()["mirror_panel"]):
        hi = min(lo + get_config()["mirror_panel"], a.shape[0])
        a[lo:hi, :lo] = a[:lo, lo:hi].T
        a[lo:hi, lo:hi] = np.triu(a[lo:hi, lo:hi]) + np.triu(a[lo:hi, lo:hi], 1).T


def design_operator(basis: RTVBasis, data: PreferenceData) -> LinearOperator:
    """The N × k design of the comparisons in RTV coordinates as a linear operator, never formed.

    With θ_rtv = (B₁₁, B₁₂, B₂₁), x̃ = Ûᵀx and G = B₁₁V̂₁ᵀ + B₁₂V̂₂ᵀ (r × d_φ, V̂₁ the first
    r columns of V̂),

        (Zθ)_t = x̃₁ᵀ G Δφ_t + x̃₂ᵀ B₂₁ V̂₁ᵀΔφ_t,

    and Zᵀw is the adjoint (H = Σ_t w_t x̃_t1 Δφ_tᵀ, then HV̂₁, HV̂₂ and Σ_t w_t x̃_t2 (V̂₁ᵀΔφ_t)ᵀ).
    Each product reads ΔΦ once: O(N d_φ r + r d_φ²) time and O(N r) memory, where the
    explicit design holds N × k numbers. PRS's reduced MLE uses it when the design
    would exceed ``config["design_block_bytes"]``.
    """
    if not isinstance(basis, RTVBasis):
        raise TypeError(f"basis must be an RTVBasis, got {type(basis).__name__}")
    check_coordinates(basis, data.d_x, data.d_phi, "basis")
    r, dx, dp = basis.rank, basis.d_x, basis.d_phi
    v1, v2 = basis.right[:, :r], basis.right[:, r:]
    dphi = data.differences
    xt = data.contexts @ basis.left
    x1, x2 = xt[:, :r], xt[:, r:]
    d1 = dphi @ v1
    n11, n12 = r * r, r * (dp - r)

    def matvec(theta):
        theta = np.ravel(theta)
        a = theta[:n11].reshape(r, r)
        b = theta[n11:n11 + n12].reshape(r, dp - r)
        c = theta[n11 + n12:].reshape(dx - r, r)
        g = a @ v1.T + b @ v2.T
        return np.einsum("ti,ti->t", x1, dphi @ g.T) + np.einsum("ti,ti->t", x2 @ c, d1)

    def rmatvec(w):
        w = np.ravel(w)
        h = (w[:, None] * x1).T @ dphi
        return np.concatenate([(h @ v1).ravel(), (h @ v2).ravel(), ((w[:, None] * x2).T @ d1).ravel()])

    return LinearOperator((data.n, basis.dim), matvec=matvec, rmatvec=rmatvec, dtype=float)


def reached_coordinates(coordinates: Coordinates, data: PreferenceData) -> np.ndarray:
    """Whether some comparison reaches each coordinate (bool, (k,)): Σ_t z_ti² > 0, z_t its design row.

    The diagonal of :func:`information` without its k × k: summed a block of rows
    (``config["design_block_bytes"]``) at a time, so the N × k design is never formed whole.
    """
    check_coordinates(coordinates, data.d_x, data.d_phi, "coordinates")
    total = np.zeros(coordinates.dim)
    rows = max(1, get_config()["design_block_bytes"] // (8 * coordinates.dim))
    for lo in range(0, data.n, rows):
        z = coordinates.transform(data.contexts[lo:lo + rows], data.difference_rows(lo, lo + rows))
        total += np.einsum("ti,ti->i", z, z)
    if total.max() <= 0:
        return np.zeros(coordinates.dim, dtype=bool)
    return total > get_config()["reach_rtol"] * total.max()


def identified_directions(coordinates: Coordinates, data: PreferenceData, *,
                          rtol: float | None = None) -> np.ndarray:
    """Orthonormal basis P (k × k_eff) of range(Σ_t z_t z_tᵀ), z_t the comparisons' coordinates.

    These are the directions of θ that the likelihood depends on; k_eff is the
    rank of the Gram matrix, eigenvalues below ``rtol`` times the largest counting
    as zero (:func:`~bayes_loco.linalg.range_mask`, the rule of :class:`~bayes_loco.EllipsoidSet`).
    From the k × k Gram matrix (:func:`information`), never the N × k design.

    Parameters
    ----------
    coordinates : Coordinates
        The coordinates of θ: an :class:`~bayes_loco.RTVBasis` or :class:`~bayes_loco.VecCoordinates`.
    data : PreferenceData
        The comparisons whose z_t span the range.
    rtol : float
        Eigenvalues of the Gram matrix below ``rtol`` times the largest count as zero.

    Returns
    -------
    ndarray, shape (k, k_eff)
        P, with orthonormal columns.

    Examples
    --------
    >>> P = bl.design.identified_directions(fit.basis, data)
    >>> P.shape, np.allclose(P.T @ P, np.eye(8))          # k = 16, k_eff = 8
    ((16, 8), True)
    """
    if not isinstance(data, PreferenceData):
        raise TypeError(f"data must be a PreferenceData, got {type(data).__name__}")
    rtol = check_real(get_config()["range_rtol"] if rtol is None else rtol, "rtol", 0.0, 1.0, high_open=True)
    vals, vecs = np.linalg.eigh(information(coordinates, data))
    return vecs[:, range_mask(vals, rtol)]


def population_coordinates(uncertainty_set: UncertaintySet, population: Population) -> Coordinates:
    """The set's coordinates, or one error if they live on other (d_x, d_φ) than the population."""
    coordinates = uncertainty_set.coordinates
    if (population.d_x, population.d_phi) != (coordinates.d_x, coordinates.d_phi):
        raise ValueError(f"population has (d_x, d_phi) = ({population.d_x}, {population.d_phi}), but the "
                         f"set's coordinates live on ({coordinates.d_x}, {coordinates.d_phi}): evaluate "
                         "the set on a population with the features of the data it was fitted on")
    return coordinates


def relative_features(coordinates: Coordinates, contexts: np.ndarray, features: np.ndarray,
                      reference_action: int) -> np.ndarray:
    """Coordinates of x (φ(s, a) − φ(s, a_ref))ᵀ for rows of contexts (n, d_x) and features (n, A, d_φ)."""
    return coordinates.transform(contexts, features - features[:, reference_action: reference_action + 1, :])


def candidate_features(uncertainty_set: UncertaintySet, population: Population,
                       reference_action: int = 0) -> np.ndarray:
    """z(x_i, s_i, a) = coordinates of x_i (φ(s_i, a) − φ(s_i, a_ref))ᵀ, shape (n, A, k)."""
    coordinates = population_coordinates(uncertainty_set, population)
    feats = population.features
    check_memory(8.0 * feats.shape[0] * feats.shape[1] * coordinates.dim,
                 f"the candidate features of {feats.shape[0]} units x {feats.shape[1]} actions in "
                 f"{coordinates.dim} coordinates", "evaluate the policy on fewer units at a time")
    return relative_features(coordinates, population.contexts, feats, reference_action)


def mean_candidate_features(uncertainty_set: UncertaintySet, population: Population, units: Units,
                            reference_action: int = 0) -> np.ndarray:
    """z̄_ua: each unit's mean of :func:`candidate_features` (``units``: a scope's units of the population,
    :meth:`~bayes_loco.Population.units`), shape (units, A, k). Every policy's moment is
    m(π) = Σ_u w_u Σ_a π_ua z̄_ua."""
    return units.mean(candidate_features(uncertainty_set, population, reference_action))
