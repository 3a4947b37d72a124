"""Linear algebra shared by the sets, the fits and the plots: one home for each rule.

- Eigenvector signs fixed by a rule, not by LAPACK (:func:`canonical_signs`).
- The identified-range rules: an eigenvalue of a Gram, information or precision matrix W counts
  as zero at or below ``config["range_rtol"]`` of the largest (:func:`range_mask`), and a feature vector z
  lies in range(W) when its component outside is at most ``config["identified_rtol"]`` of ‖z‖
  (:func:`in_range`; docs/design.md, convention 1).
- A factor of a positive semi-definite W: its eigendecomposition on the range (:func:`range_basis`)
  or, from ``config["cholesky_min"]`` coordinates on, LAPACK's pivoted Cholesky (:class:`PivotedCholesky`).
- The dimension of a span, sketched where it is wide (:func:`span_dimension`).
- The sandwich precision H J⁺ H (:func:`sandwich_precision`).

Nothing here knows about data, coordinates or sets: plain NumPy/LAPACK on matrices.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy import linalg
from scipy.linalg import lapack

from ._domains import is_real
from ._validation import check_magnitude
from .config import get_config


def range_mask(vals: np.ndarray, rtol: float | None = None) -> np.ndarray:
    """Which eigenvalues of a PSD matrix span its range: those above ``rtol`` (``config["range_rtol"]``
    when None) times the largest."""
    rtol = get_config()["range_rtol"] if rtol is None else rtol
    return vals > rtol * max(float(vals.max(initial=0.0)), np.finfo(float).tiny)


def canonical_signs(vecs: np.ndarray) -> np.ndarray:
    """``vecs`` with each column's sign chosen so that its entry of largest magnitude is positive.

    LAPACK returns an eigenvector or a singular vector up to its sign, and which sign depends on
    rounding (another BLAS, another CPU, a last-bit change in the matrix). Whatever is simulated in
    that basis (a Monte Carlo quantile drawn with a fixed seed) then changes with it; in this basis
    it does not.
    """
    if not vecs.size:
        return vecs
    top = np.abs(vecs).argmax(axis=0)
    return vecs * np.where(vecs[top, np.arange(vecs.shape[1])] < 0, -1.0, 1.0)


def in_range(total: np.ndarray, outside: np.ndarray) -> np.ndarray:
    """Whether z lies in range(W), from ``total`` = ‖z‖² and ``outside`` = ‖z − Pz‖² (P the projection on
    range(W)): the part outside is at most ``config["identified_rtol"]`` of ‖z‖."""
    return outside <= get_config()["identified_rtol"]**2 * total


def range_basis(rows: np.ndarray, *, rtol: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Orthonormal bases of the span of the rows of ``rows`` (n × d) and of its complement in Rᵈ.

    From the eigenvectors of the Gram matrix ``rowsᵀ rows``, eigenvalues at or
    below ``rtol`` times the largest counting as zero (:func:`range_mask`). Returns (d × d', d × (d − d')).
    """
    vals, vecs = np.linalg.eigh(rows.T @ rows)
    keep = range_mask(vals, rtol)
    return vecs[:, keep], vecs[:, ~keep]


def span_dimension(rows: np.ndarray, at_most: int, *, rtol: float | None = None) -> int:
    """min(the dimension of the span of the rows of ``rows`` (n × d), ``at_most``).

    Counted as :func:`range_basis` counts it, from the Gram matrix, but of ``rows`` G
    with G a fixed Gaussian d × ``at_most`` sketch where ``at_most`` < d: n·d·``at_most``
    flops where the Gram of ``rows`` costs n·d² (d in the thousands for LLM features). For a
    Gaussian G, rank(``rows`` G) = min(rank(``rows``), ``at_most``) with probability 1.
    """
    if at_most < rows.shape[1]:
        rows = rows @ np.random.default_rng(0).standard_normal((rows.shape[1], at_most))
    return int(np.count_nonzero(range_mask(np.linalg.eigvalsh(rows.T @ rows), rtol)))


def sandwich_precision(bread: np.ndarray, meat: np.ndarray) -> np.ndarray:
    """H J⁺ H, the inverse of the sandwich covariance H⁺ J H⁺ on the identified directions.

    ``bread`` H and ``meat`` J are sums of c_t z_t z_tᵀ over the same rows with c_t > 0, so
    they share their range, along which (H⁺ J H⁺)(H J⁺ H) is the identity; outside it the
    precision is 0 (a cylinder, as for the information). J⁺ keeps J's eigenvalues above
    ``config["range_rtol"]`` of the largest, on the coordinates that some comparison reaches.
    """
    live = np.flatnonzero(np.diag(meat) > 0)
    block = meat[np.ix_(live, live)]
    if live.size >= get_config()["cholesky_min"]:
        # J = LLᵀ gives H J⁻¹ H = (L⁻¹H)ᵀ(L⁻¹H) in about k³/3 flops where eigh costs 9k³, when J is
        # well conditioned (the ellipsoid's rule); a J with unidentified directions goes to eigh.
        chol, info = lapack.dpotrf(block, lower=1, clean=1)
        rcond = lapack.dpocon(chol, np.linalg.norm(block, 1), uplo="L")[0] if info == 0 else 0.0
        if info == 0 and rcond > get_config()["cholesky_rcond"]:
            half = linalg.solve_triangular(chol, bread[live], lower=True, check_finite=False)
            return half.T @ half
    vals, vecs = np.linalg.eigh(block)
    keep = range_mask(vals)
    half = bread[:, live] @ (vecs[:, keep] / np.sqrt(vals[keep]))
    return half @ half.T


def row_norms(a: np.ndarray) -> np.ndarray:
    """‖a_i‖ over the last axis, ``config["whiten_block_bytes"]`` at a time (np.linalg.norm squares all of a
    at
    once: a temporary of a's size, 2.5 GB for LLM-width candidates). The same numbers, row by row."""
    if not a.shape[-1]:
        return np.zeros(a.shape[:-1])
    flat = a.reshape(-1, a.shape[-1])
    out = np.empty(flat.shape[0])
    rows = max(1, get_config()["whiten_block_bytes"] // (8 * flat.shape[1]))
    for lo in range(0, flat.shape[0], rows):
        out[lo: lo + rows] = np.linalg.norm(flat[lo: lo + rows], axis=-1)
    return out.reshape(a.shape[:-1])


def live_coordinates(precision: np.ndarray) -> np.ndarray:
    """The coordinates whose row or column of W is not exactly 0."""
    nonzero = precision != 0
    return np.flatnonzero(np.any(nonzero, axis=0) | np.any(nonzero, axis=1))


def pivoted_cholesky(precision: np.ndarray, live: np.ndarray, overwrite: bool) -> PivotedCholesky | None:
    """W's pivoted Cholesky factorisation on its ``live`` coordinates; None where W is 0 there or its
    kept block's reciprocal condition number is at most ``config["cholesky_rcond"]``.

    With ``overwrite`` and every coordinate live, the factor is computed in W's own memory.
    """
    if not live.size:
        return None
    if live.size < precision.shape[0]:
        block = precision[np.ix_(live, live)]
    else:
        block = precision if overwrite else precision.copy()
    norm = max(float(np.abs(block[:, lo: lo + 512]).sum(axis=0).max()) for lo in range(0, live.size, 512))
    diagonal = np.diag(block).copy()
    top = float(np.max(diagonal))
    # W is symmetric, so block or block.T, whichever is Fortran-ordered, is W as LAPACK reads it, and it is
    # factorised in place without a copy. dpstrf reads and writes its lower triangle only: the strict upper
    # one keeps W.
    fortran = block if block.flags.f_contiguous else block.T
    tol = get_config()["range_rtol"] * max(top, 0.0)
    chol, perm, rank, info = lapack.dpstrf(fortran, lower=1, tol=tol, overwrite_a=1)
    if info < 0 or rank == 0:
        return None
    dropped = perm[rank:] - 1
    rest = fortran[np.minimum.outer(dropped, dropped), np.maximum.outer(dropped, dropped)]
    rest[np.diag_indices_from(rest)] = diagonal[dropped]
    perm = live[perm - 1]
    tail = chol[rank:, :rank].copy()
    lead = _leading_lower(chol, rank)
    # The 1-norm of W bounds its kept block's, so this underestimates that block's rcond: conservative.
    rcond, info = lapack.dpocon(lead, norm, uplo="L")
    if info != 0 or rcond <= get_config()["cholesky_rcond"]:
        return None
    if rank < live.size:  # W is PSD iff the Schur complement of the kept block is (Haynsworth)
        low = float(np.linalg.eigvalsh(rest - tail @ tail.T).min())
        if low < -1e-8 * top:
            raise ValueError(f"precision (W) must be positive semi-definite; the Schur complement of its "
                             f"pivoted Cholesky factor has an eigenvalue {low:.3g} against a largest "
                             f"diagonal of {top:.3g}")
    return PivotedCholesky(perm, lead, tail, float(rcond))


def _leading_lower(chol: np.ndarray, rank: int) -> np.ndarray:
    """The lower triangle of chol[:rank, :rank] as a contiguous array in chol's own memory (chol is
    Fortran-ordered and is overwritten): no second k × k array (2.2 GB at LLM width)."""
    n = chol.shape[0]
    flat = chol.reshape(-1, order="F")
    for j in range(rank):
        column = flat[j * n: j * n + rank]
        column[:j] = 0.0
        flat[j * rank: (j + 1) * rank] = column  # numpy buffers the overlapping copy
    return flat[: rank * rank].reshape(rank, rank, order="F")


@dataclass(frozen=True, eq=False)
class PivotedCholesky:
    """W restricted to its live coordinates, pivoted: P B Bᵀ Pᵀ with B = [C₁; C₂] and C₁ lower triangular
    (LAPACK's dpstrf).

    ``perm`` lists the live coordinates in pivot order. z lies in range(W) exactly when it is 0 off
    them and its permuted tail equals C₂a with a = C₁⁻¹(its permuted head); then ‖z‖_{W⁺} = ‖a‖,
    because Bᵀ(BBᵀ)⁺B = I for B of full column rank.

    Attributes
    ----------
    perm : ndarray of int, shape (live,)
        The live coordinates in pivot order.
    lead : ndarray, shape (rank, rank)
        C₁, lower triangular with a positive diagonal (its upper triangle is never read).
    tail : ndarray, shape (live − rank, rank)
        C₂.
    rcond : float
        LAPACK's estimate of C₁C₁ᵀ's reciprocal condition number, in (0, 1].
    """

    perm: np.ndarray
    lead: np.ndarray
    tail: np.ndarray
    rcond: float

    def __post_init__(self):
        # solve_triangular reads C₁ in Fortran order without a transposed solve: a factor loaded from a file
        # (C order) then gives the same numbers, bit for bit, as the one dpstrf wrote.
        if isinstance(self.lead, np.ndarray) and not self.lead.flags.f_contiguous:
            object.__setattr__(self, "lead", np.asfortranarray(self.lead))

    def check(self, dim: int) -> None:
        """Refuse a factor that cannot be W's for ``dim`` coordinates, naming the wrong field (O(k²))."""
        perm = np.asarray(self.perm)
        if perm.ndim != 1 or perm.dtype.kind not in "iu" or perm.size == 0:
            raise ValueError(f"pivots must be a non-empty 1-d integer array, got {perm.dtype} "
                             f"{perm.shape}")
        if perm.min() < 0 or perm.max() >= dim or np.unique(perm).size != perm.size:
            raise ValueError(f"pivots must list distinct coordinates in [0, {dim - 1}]")
        lead, tail = self.lead, self.tail
        square = isinstance(lead, np.ndarray) and lead.ndim == 2 and lead.shape[0] == lead.shape[1]
        if not square or not lead.size:
            raise ValueError(f"cholesky must be a square (rank, rank) array, got shape {np.shape(lead)}")
        rank = lead.shape[0]
        if not isinstance(tail, np.ndarray) or tail.shape != (perm.size - rank, rank):
            raise ValueError(f"cholesky_tail must have shape ({perm.size - rank}, {rank}) (live coordinates "
                             f"beyond the rank x rank), got {np.shape(tail)}")
        check_magnitude(lead, "cholesky")
        check_magnitude(tail, "cholesky_tail")
        if not np.all(np.diag(lead) > 0):
            raise ValueError("cholesky must have a positive diagonal (a Cholesky factor)")
        rcond = self.rcond
        if not is_real(rcond) or not 0 < rcond <= 1:
            raise ValueError(f"rcond must be in (0, 1], got {self.rcond!r}")

    @property
    def rank(self) -> int:
        return self.lead.shape[0]

    def split(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """‖z‖_{W⁺} and whether z lies in range(W) (see the class docstring)."""
        a, inside = self.whitened(z)
        return np.linalg.norm(a, axis=-1), inside

    def whitened(self, z: np.ndarray, out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """a = C₁⁻¹(permuted head of z) (…, rank), which is Lᵀz for z in range(W), and whether z is there.

        ``config["whiten_block_bytes"]`` of z at a time: its permuted copy is the only temporary. ``out``
        (…, rank), C-contiguous, receives a when given.
        """
        flat = z.reshape(-1, z.shape[-1])
        result = np.empty((*z.shape[:-1], self.rank)) if out is None else out
        out = np.reshape(result, (flat.shape[0], self.rank), copy=False)  # raises rather than copy
        inside = np.empty(flat.shape[0], dtype=bool)
        rows = max(1, get_config()["whiten_block_bytes"] // (8 * flat.shape[1]))
        for lo in range(0, flat.shape[0], rows):
            block = flat[lo: lo + rows]
            live = block[:, self.perm]
            head = linalg.solve_triangular(self.lead, live[:, : self.rank].T, lower=True)
            total = np.einsum("ij,ij->i", block, block)
            outside = total - np.einsum("ij,ij->i", live, live)  # the part on coordinates W never reaches
            if self.tail.shape[0]:
                gap = live[:, self.rank:].T - self.tail @ head
                outside = outside + np.einsum("ij,ij->j", gap, gap)
            inside[lo: lo + rows] = in_range(total, outside)
            out[lo: lo + rows] = head.T
        return result, inside.reshape(z.shape[:-1])

    def norm(self, d: np.ndarray) -> np.ndarray:
        """‖Bᵀ(permuted d)‖ = ‖d‖_W up to W's Schur complement beyond the kept block, for d (…, dim)."""
        live = d[..., self.perm]
        product = live[..., : self.rank] @ self.lead
        if self.tail.shape[0]:
            product += live[..., self.rank:] @ self.tail
        return np.linalg.norm(product, axis=-1)

    def apply(self, u: np.ndarray, dim: int) -> np.ndarray:
        """L u (dim,) for L of :meth:`factor`, by one triangular solve instead of forming L."""
        top = linalg.solve_triangular(self.lead, u, lower=True, trans="T")
        out = np.zeros(dim)
        if self.tail.shape[0]:
            h = self._dropped
            top = top - h.T @ linalg.solve(np.eye(h.shape[0]) + h @ h.T, h @ top, assume_a="pos")
            out[self.perm[self.rank:]] = h @ top
        out[self.perm[: self.rank]] = top
        return out

    @cached_property
    def _dropped(self) -> np.ndarray:
        """H = C₂C₁⁻¹: the dropped rows of the factor in terms of the kept ones."""
        return linalg.solve_triangular(self.lead, self.tail.T, lower=True, trans="T").T

    def factor(self, dim: int) -> np.ndarray:
        """L (dim × rank) with L Lᵀ = W⁺, rows un-pivoted: L = B (BᵀB)⁻¹.

        With H = C₂C₁⁻¹ (the few dropped rows), BᵀB = C₁ᵀ(I + HᵀH)C₁, so by the push-through
        identity L = [I; H] (I − Hᵀ(I + HHᵀ)⁻¹H) C₁⁻ᵀ: one triangular inverse and products with
        H, where forming BᵀB would cost k·rank² more (C₁⁻ᵀ alone when W is definite).
        """
        inverse, _ = lapack.dtrtri(self.lead, lower=1)
        top = inverse.T
        if self.tail.shape[0]:
            h = self._dropped
            inner = np.eye(h.shape[0]) + h @ h.T
            top -= h.T @ linalg.solve(inner, h @ top, assume_a="pos")
        out = np.zeros((dim, self.rank))
        out[self.perm[: self.rank]] = top
        if self.tail.shape[0]:
            out[self.perm[self.rank:]] = h @ top
        return out
