"""The reduce stage: coordinates in which an estimate and its uncertainty set live.

Both roads map Θ (d_x × d_φ) to k numbers by a linear map and every feature
matrix Z = x φᵀ to the k-vector z with ⟨Z, Θ⟩ = zᵀθ (up to what the map drops):

- :class:`VecCoordinates`: vec(Θ), k = d_x·d_φ (the MLE baselines);
- :class:`RTVBasis`: the paper's rotation–truncation–vectorization, k = (d_x + d_φ) r − r²
  (PRS and the posterior).

With full SVD bases Û (d_x × d_x), V̂ (d_φ × d_φ) of a rank-r estimate Θ̂, RTV
rotates Θ' = Ûᵀ Θ V̂ and splits it into blocks 11 (r × r), 12 (r × (d_φ−r)),
21 ((d_x−r) × r) and 22. It keeps blocks 11, 12, 21, so for any Z = x φᵀ

    ⟨Z, Θ⟩ = ⟨z_rtv, θ_rtv⟩ + ⟨Z'₂₂, Θ'₂₂⟩.

The truncated block is second order near Θ̂: every rank-r Θ near Θ̂ has
Θ'₂₂ = Θ'₂₁ Θ'₁₁⁻¹ Θ'₁₂ (docs/design.md, "The identified chart").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
from scipy.linalg import blas
from scipy.sparse.linalg import LinearOperator

from ._validation import as_float_array, check_int, check_memory, check_rank, check_real, check_shape
from .data import PreferenceData

# Eigenvalues of a Gram or information matrix below this fraction of the largest are treated as
# zero: those directions are not reached by any comparison (docs/design.md, convention 1).
RANGE_RTOL = 1e-10
# Designs are formed at most this many bytes at a time: Gram and information matrices are summed block by
# block, and above it PRS's reduced MLE runs on the implicit design (design_operator), never N × k.
DESIGN_BLOCK_BYTES = 256 * 1024**2
# Rows a symmetric matrix is completed from its upper triangle at a time (no k × k temporary).
MIRROR_PANEL = 512
# Gram and Fisher matrices of more coordinates than this are summed by column panels of this width
# (weighted_gram: large threaded dsyrk calls crash OpenBLAS on some machines).
GRAM_PANEL = 2048
# ... except in RTV coordinates, where each of the r(r+1)/2 pairs of context directions gets its own
# d_φ × d_φ matrix, summed by column panels of this width (weighted_gram: _rtv_gram).
PAIR_PANEL = 512


@runtime_checkable
class Coordinates(Protocol):
    """A linear map from (x, φ) to the k coordinates in which a set lives."""

    @property
    def dim(self) -> int:
        """k, the number of coordinates."""
        ...

    @property
    def d_x(self) -> int: ...

    @property
    def d_phi(self) -> int: ...

    def transform(self, contexts: np.ndarray, features: np.ndarray) -> np.ndarray:
        """z for contexts (n, d_x) and features (n, d_φ) or (n, A, d_φ): shape (n, [A,] k)."""
        ...

    def to_coordinates(self, theta: np.ndarray) -> np.ndarray:
        """Θ (…, d_x, d_φ) in these coordinates, shape (…, k)."""
        ...

    def labels(self) -> list[str]:
        """A label for each of the k coordinates."""
        ...


def broadcast_contexts(contexts: np.ndarray, features: np.ndarray) -> np.ndarray:
    """Contexts (n, d_x) reshaped to broadcast against features (n, …, d_φ)."""
    return contexts.reshape(contexts.shape[0], *([1] * (features.ndim - 2)), contexts.shape[1])


@dataclass(frozen=True, eq=False)
class VecCoordinates:
    """vec(Θ) in row-major order: z = vec(x φᵀ), k = d_x·d_φ (the MLE baselines)."""

    d_x: int
    d_phi: int

    def __post_init__(self):
        object.__setattr__(self, "d_x", check_int(self.d_x, "d_x", 1))
        object.__setattr__(self, "d_phi", check_int(self.d_phi, "d_phi", 1))

    @property
    def dim(self) -> int:
        return self.d_x * self.d_phi

    def transform(self, contexts, features):
        outer = broadcast_contexts(contexts, features)[..., :, None] * features[..., None, :]
        return outer.reshape(*features.shape[:-1], self.dim)

    def to_coordinates(self, theta):
        return theta.reshape(*theta.shape[:-2], self.dim)

    def labels(self) -> list[str]:
        """``"[i,j]"``: row i (context) and column j (feature) of Θ."""
        return [f"[{i},{j}]" for i in range(self.d_x) for j in range(self.d_phi)]


@dataclass(frozen=True, eq=False)
class RTVBasis:
    """The rotation (Û, V̂) and rank r that define RTV coordinates; k = (d_x + d_φ) r − r².

    It is a :class:`Coordinates` object: sets built on it take x and φ through
    :meth:`transform`.
    """

    left: np.ndarray
    right: np.ndarray
    rank: int

    def __post_init__(self):
        # Orthogonality is not checked: it costs O(d³), and the bases come from an SVD (rtv_basis).
        for name in ("left", "right"):
            basis = as_float_array(getattr(self, name), name, 2)
            d = basis.shape[0]
            object.__setattr__(self, name, check_shape(basis, name, (d, d), " (a full orthonormal basis)"))
        object.__setattr__(self, "rank", check_rank(self.rank, self.left.shape[0], self.right.shape[0]))

    @property
    def d_x(self) -> int:
        return self.left.shape[0]

    @property
    def d_phi(self) -> int:
        return self.right.shape[0]

    @property
    def dim(self) -> int:
        r = self.rank
        return (self.d_x + self.d_phi) * r - r * r

    def _blocks(self, rotated: np.ndarray) -> np.ndarray:
        r = self.rank
        lead = rotated.shape[:-2]
        return np.concatenate([rotated[..., :r, :r].reshape(*lead, -1),
                               rotated[..., :r, r:].reshape(*lead, -1),
                               rotated[..., r:, :r].reshape(*lead, -1)], axis=-1)

    def rotate(self, theta: np.ndarray) -> np.ndarray:
        """Θ' = Ûᵀ Θ V̂ for Θ of shape (…, d_x, d_φ)."""
        return self.left.T @ theta @ self.right

    def to_coordinates(self, theta: np.ndarray) -> np.ndarray:
        """θ_rtv of Θ (…, d_x, d_φ): the vectorised blocks 11, 12, 21 of Θ'."""
        return self._blocks(self.rotate(theta))

    def block22(self, theta: np.ndarray) -> np.ndarray:
        """The truncated block Θ'₂₂ of Θ (…, d_x, d_φ)."""
        r = self.rank
        return self.rotate(theta)[..., r:, r:]

    def to_theta(self, theta_rtv: np.ndarray) -> np.ndarray:
        """Θ = Û [[B₁₁, B₁₂], [B₂₁, 0]] V̂ᵀ for θ_rtv of shape (…, k)."""
        r, dx, dp = self.rank, self.d_x, self.d_phi
        lead = theta_rtv.shape[:-1]
        rotated = np.zeros((*lead, dx, dp))
        n11, n12 = r * r, r * (dp - r)
        rotated[..., :r, :r] = theta_rtv[..., :n11].reshape(*lead, r, r)
        rotated[..., :r, r:] = theta_rtv[..., n11:n11 + n12].reshape(*lead, r, dp - r)
        rotated[..., r:, :r] = theta_rtv[..., n11 + n12:].reshape(*lead, dx - r, r)
        return self.left @ rotated @ self.right.T

    def transform(self, contexts: np.ndarray, features: np.ndarray) -> np.ndarray:
        """z_rtv of Z = x φᵀ for contexts (n, d_x) and features (n, [A,] d_φ), without Kronecker.

        Only the three kept blocks of the rotated outer product (Ûᵀx)(V̂ᵀφ)ᵀ are formed.
        Each block is multiplied straight into its slice of the result: no temporary of the
        result's size (2.5 GB for 2,000 units × 10 actions at k = 16,496).
        """
        r, dp = self.rank, self.d_phi
        xr = broadcast_contexts(contexts @ self.left, features)
        fr = features @ self.right
        lead = fr.shape[:-1]
        out = np.empty((*lead, self.dim))
        n11, n12 = r * r, r * (dp - r)
        for (lo, hi), left, right in (((0, n11), xr[..., :r, None], fr[..., None, :r]),
                                      ((n11, n11 + n12), xr[..., :r, None], fr[..., None, r:]),
                                      ((n11 + n12, self.dim), xr[..., r:, None], fr[..., None, :r])):
            if hi > lo:  # block 21 is empty when r = d_x, block 12 when r = d_φ
                rows = left.shape[-2]
                np.multiply(left, right, out=out[..., lo:hi].reshape(*lead, rows, (hi - lo) // rows))
        return out

    def labels(self) -> list[str]:
        """``"11 (u0, v0)"``, …: the block and the pair of singular directions (û_i, v̂_j) of each coordinate.

        Coordinate (i, j) of Θ' = Ûᵀ Θ V̂ is û_iᵀ Θ v̂_j, the reward weight between the
        basis fit's i-th context direction and j-th feature direction. Block 11 is
        r × r (i, j < r), 12 is r × (d_φ − r) (i < r ≤ j) and 21 is (d_x − r) × r
        (j < r ≤ i).
        """
        return [f"{block} (u{i}, v{j})" for block, i, j in self.entries()]

    def entries(self) -> list[tuple[str, int, int]]:
        """(block, i, j) of each coordinate, in order: the entry (i, j) of Θ' = Ûᵀ Θ V̂ it holds."""
        r, dx, dp = self.rank, self.d_x, self.d_phi
        return ([("11", i, j) for i in range(r) for j in range(r)]
                + [("12", i, j) for i in range(r) for j in range(r, dp)]
                + [("21", i, j) for i in range(r, dx) for j in range(r)])


def rtv_basis(theta_hat, rank: int) -> RTVBasis:
    """RTV coordinates from the full SVD of a rank-r estimate Θ̂ (d_x × d_φ)."""
    theta_hat = as_float_array(theta_hat, "theta_hat", 2)
    rank = check_rank(rank, *theta_hat.shape)
    check_memory(16.0 * sum(d * d for d in theta_hat.shape), "the full SVD bases Û and V̂",
                 "the RTV coordinates need d_x² + d_φ² numbers; reduce the feature dimension")
    u, _, vt = np.linalg.svd(theta_hat, full_matrices=True)
    return RTVBasis(u, vt.T, rank)


def check_coordinates(coordinates, d_x: int, d_phi: int, what: str) -> Coordinates:
    """``coordinates`` as a :class:`Coordinates` on (d_x, d_φ), or one error naming ``what``."""
    if not isinstance(coordinates, Coordinates):
        raise TypeError(f"{what} must be a Coordinates object (RTVBasis, VecCoordinates), "
                        f"got {type(coordinates).__name__}")
    if (coordinates.d_x, coordinates.d_phi) != (d_x, d_phi):
        raise ValueError(f"{what} live on (d_x, d_phi) = ({coordinates.d_x}, {coordinates.d_phi}), "
                         f"but the data have ({d_x}, {d_phi})")
    return coordinates


def design(coordinates: Coordinates, data: PreferenceData) -> np.ndarray:
    """The N × k design of the comparisons in these coordinates: row t is z of x_t Δφ_tᵀ.

    Refused (``MemoryError``) when N × k does not fit in memory; :func:`weighted_gram`
    and :func:`design_operator` give what is needed of it without forming it.
    """
    check_coordinates(coordinates, data.d_x, data.d_phi, "coordinates")
    check_memory(8.0 * data.n * coordinates.dim, f"the {data.n} x {coordinates.dim} design",
                 "use weighted_gram or design_operator, which never form it")
    return coordinates.transform(data.contexts, data.differences)


def weighted_gram(coordinates: Coordinates, data: PreferenceData, weights: np.ndarray | None = None
                  ) -> np.ndarray:
    """Σ_t w_t z_t z_tᵀ (k × k) over the comparisons' coordinates; w_t = 1 gives the Gram matrix W.

    The design is formed :data:`DESIGN_BLOCK_BYTES` at a time, so the memory is k² plus
    one block, never N × k (at LLM-width features N × k is 13 GB for N = 100,000). Each
    block updates the upper triangle only (BLAS ``dsyrk`` of √w_t z_t, or above
    :data:`GRAM_PANEL` coordinates general products by column panels): about half the
    multiplications of a general product, which dominate at LLM width (N k² = 2.7·10¹³ at
    N = 100,000).
    With ``weights`` p̂_t(1 − p̂_t) it is the Fisher information of a linear logit.
    Refused (``MemoryError``) when the k × k result does not fit in memory.
    """
    check_coordinates(coordinates, data.d_x, data.d_phi, "coordinates")
    if weights is not None:
        weights = as_float_array(weights, "weights", 1)
        if weights.shape != (data.n,) or not np.all(weights >= 0):
            what = f"shape {weights.shape}" if weights.shape != (data.n,) else "some negative"
            raise ValueError(f"weights must be {data.n} nonnegative numbers (one per comparison), got {what}")
    k = coordinates.dim
    if isinstance(coordinates, RTVBasis) and k > GRAM_PANEL:
        return _rtv_gram(coordinates, data, weights)  # checks the memory it needs itself
    block = max(1, DESIGN_BLOCK_BYTES // (8 * k))
    check_memory(8.0 * k * (k + min(block, data.n)), f"the {k} x {k} Gram matrix of the coordinates",
                 "use fewer coordinates (a lower rank) or a machine with more memory")
    out = np.zeros((k, k), order="F") if k <= GRAM_PANEL else None
    spans = [(lo, min(lo + GRAM_PANEL, k)) for lo in range(0, k, GRAM_PANEL)]
    panels = [np.zeros((hi, hi - lo), order="F") for lo, hi in spans] if out is None else []
    for lo in range(0, data.n, block):
        z = coordinates.transform(data.contexts[lo: lo + block], data.differences[lo: lo + block])
        if weights is not None:
            z *= np.sqrt(weights[lo: lo + block])[:, None]
        if out is not None:
            # zᵀz is a·aᵀ for a = zᵀ, which is z's memory read in Fortran order: no copy.
            out = blas.dsyrk(1.0, z.T, beta=1.0, c=out, trans=0, lower=0, overwrite_c=1)
            continue
        # Above GRAM_PANEL coordinates, the upper triangle by column panels, each a general product into
        # its own Fortran array: the threaded dsyrk of the OpenBLAS in the NumPy and SciPy wheels (0.3.34)
        # writes out of bounds and crashes the process at k = 16,496 with 800 rows or more (seen on an
        # AVX-512 AMD EPYC), and panels of z's Fortran copy need no temporaries. The diagonal blocks'
        # lower halves (k·GRAM_PANEL/2 of k²/2 entries) are the only extra work.
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
    """:func:`weighted_gram` in RTV coordinates from their Kronecker structure.

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
    spans = [(lo, min(lo + PAIR_PANEL, dp)) for lo in range(0, dp, PAIR_PANEL)]
    rows = max(1, DESIGN_BLOCK_BYTES // (8 * dp))
    check_memory(8.0 * (k * k + len(pairs) * sum(hi * (hi - lo) for lo, hi in spans) + dp * dp
                        + 3 * min(rows, data.n) * dp),
                 f"the {k} x {k} Gram matrix of the coordinates and its {len(pairs)} partial sums",
                 "use fewer coordinates (a lower rank) or a machine with more memory")
    panels = {pair: [np.zeros((hi, hi - lo), order="F") for lo, hi in spans] for pair in pairs}
    across = np.zeros((r, dp, k - n11 - n12))
    corner = np.zeros((k - n11 - n12, k - n11 - n12))
    scaled = np.empty((min(rows, data.n), dp), order="F")
    for lo in range(0, data.n, rows):
        xt = data.contexts[lo: lo + rows] @ basis.left
        ft = (basis.right.T @ data.differences[lo: lo + rows].T).T  # f̃ of the block, Fortran-ordered
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
    for lo in range(0, a.shape[0], MIRROR_PANEL):
        hi = min(lo + MIRROR_PANEL, a.shape[0])
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
    would exceed :data:`DESIGN_BLOCK_BYTES`.
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


def identified_directions(coordinates: Coordinates, data: PreferenceData, *,
                          rtol: float = RANGE_RTOL) -> np.ndarray:
    """Orthonormal basis P (k × k_eff) of range(Σ_t z_t z_tᵀ), z_t the comparisons' coordinates.

    These are the directions of θ that the likelihood depends on; k_eff is the
    rank of the Gram matrix, eigenvalues below ``rtol`` times the largest counting
    as zero (the same rule as :class:`~bayes_loco.EllipsoidSet`).
    """
    if not isinstance(data, PreferenceData):
        raise TypeError(f"data must be a PreferenceData, got {type(data).__name__}")
    rtol = check_real(rtol, "rtol", 0.0, 1.0, high_open=True)
    return range_basis(design(coordinates, data), rtol=rtol)[0]


def range_basis(rows: np.ndarray, *, rtol: float = RANGE_RTOL) -> tuple[np.ndarray, np.ndarray]:
    """Orthonormal bases of the span of the rows of ``rows`` (n × d) and of its complement in Rᵈ.

    From the eigenvectors of the Gram matrix ``rowsᵀ rows``, eigenvalues at or
    below ``rtol`` times the largest counting as zero (the rule of
    :func:`identified_directions`). Returns (d × d', d × (d − d')).
    """
    vals, vecs = np.linalg.eigh(rows.T @ rows)
    keep = vals > rtol * max(vals.max(), np.finfo(float).tiny)
    return vecs[:, keep], vecs[:, ~keep]
