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

from ._validation import as_float_array, check_int, check_memory, check_rank, check_shape


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


def manifold_dim(d_x: int, d_phi: int, rank: int) -> int:
    """k = (d_x + d_φ) r − r², the dimension of the manifold of d_x × d_φ matrices Θ of rank r.

    The coordinates of :class:`RTVBasis`, the parameters of a rank-r fit (``LowRankResult.n_params``),
    and the k of ``certify_dimension_ratio``'s k / N.

    Examples
    --------
    >>> from bayes_loco.coordinates import manifold_dim
    >>> manifold_dim(5, 8, 2)
    22
    """
    return (d_x + d_phi) * rank - rank * rank


def broadcast_contexts(contexts: np.ndarray, features: np.ndarray) -> np.ndarray:
    """Contexts (n, d_x) reshaped to broadcast against features (n, …, d_φ)."""
    return contexts.reshape(contexts.shape[0], *([1] * (features.ndim - 2)), contexts.shape[1])


@dataclass(frozen=True, eq=False)
class VecCoordinates:
    """vec(Θ) in row-major order: z = vec(x φᵀ), k = d_x·d_φ (the MLE baselines).

    Examples
    --------
    >>> vec = bl.VecCoordinates(2, 3)
    >>> vec.dim
    6
    >>> vec.to_coordinates(np.arange(6.0).reshape(2, 3))
    array([0., 1., 2., 3., 4., 5.])
    """

    d_x: int
    d_phi: int

    def __post_init__(self):
        object.__setattr__(self, "d_x", check_int(self.d_x, "d_x", 1))
        object.__setattr__(self, "d_phi", check_int(self.d_phi, "d_phi", 1))

    @property
    def dim(self) -> int:
        return self.d_x * self.d_phi

    def transform(self, contexts, features):
        """z = vec(x φᵀ) for each unit and action.

        Parameters
        ----------
        contexts : ndarray of shape (n, d_x)
        features : ndarray of shape (n, d_φ) or (n, A, d_φ)

        Returns
        -------
        ndarray of shape (n, [A,] d_x·d_φ)

        Examples
        --------
        >>> bl.VecCoordinates(3, 7).transform(pop.contexts, pop.features).shape
        (50, 4, 21)
        """
        outer = broadcast_contexts(contexts, features)[..., :, None] * features[..., None, :]
        return outer.reshape(*features.shape[:-1], self.dim)

    def to_coordinates(self, theta):
        """vec(Θ), row by row.

        Parameters
        ----------
        theta : ndarray of shape (..., d_x, d_φ)

        Returns
        -------
        ndarray of shape (..., d_x·d_φ)

        Examples
        --------
        >>> bl.VecCoordinates(3, 7).to_coordinates(problem.theta).shape
        (21,)
        """
        return theta.reshape(*theta.shape[:-2], self.dim)

    def labels(self) -> list[str]:
        """``"[i,j]"``: row i (context) and column j (feature) of Θ.

        Returns
        -------
        list of str
            One per coordinate, in order.

        Examples
        --------
        >>> bl.VecCoordinates(3, 7).labels()[:3]
        ['[0,0]', '[0,1]', '[0,2]']
        """
        return [f"[{i},{j}]" for i in range(self.d_x) for j in range(self.d_phi)]


@dataclass(frozen=True, eq=False)
class RTVBasis:
    """The rotation (Û, V̂) and rank r that define RTV coordinates; k = (d_x + d_φ) r − r².

    It is a :class:`Coordinates` object: sets built on it take x and φ through
    :meth:`transform`.

    Examples
    --------
    >>> basis = bl.rtv_basis(fit.theta, rank=2)   # PRS's own basis is fit.basis
    >>> basis.dim, basis.d_x, basis.d_phi          # k = (3 + 7)·2 − 2²
    (16, 3, 7)
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
        return manifold_dim(self.d_x, self.d_phi, self.rank)

    def _blocks(self, rotated: np.ndarray) -> np.ndarray:
        r = self.rank
        lead = rotated.shape[:-2]
        return np.concatenate([rotated[..., :r, :r].reshape(*lead, -1),
                               rotated[..., :r, r:].reshape(*lead, -1),
                               rotated[..., r:, :r].reshape(*lead, -1)], axis=-1)

    def rotate(self, theta: np.ndarray) -> np.ndarray:
        """Θ' = Ûᵀ Θ V̂: Θ in the basis fit's singular directions.

        Parameters
        ----------
        theta : ndarray of shape (..., d_x, d_φ)

        Returns
        -------
        ndarray of shape (..., d_x, d_φ)

        Examples
        --------
        >>> bl.rtv_basis(fit.theta, 2).rotate(problem.theta).shape
        (3, 7)
        """
        return self.left.T @ theta @ self.right

    def to_coordinates(self, theta: np.ndarray) -> np.ndarray:
        """θ_rtv of Θ: the vectorised blocks 11, 12 and 21 of Θ' = Ûᵀ Θ V̂ (block 22 is dropped).

        Parameters
        ----------
        theta : ndarray of shape (..., d_x, d_φ)

        Returns
        -------
        ndarray of shape (..., k)

        Examples
        --------
        >>> basis = bl.rtv_basis(fit.theta, 2)
        >>> basis.to_coordinates(problem.theta).shape     # θ*_rtv
        (16,)
        """
        return self._blocks(self.rotate(theta))

    def block22(self, theta: np.ndarray) -> np.ndarray:
        """The block Θ'₂₂ of Θ' = Ûᵀ Θ V̂ that RTV drops (0 for the fit's own Θ̂).

        Parameters
        ----------
        theta : ndarray of shape (..., d_x, d_φ)

        Returns
        -------
        ndarray of shape (..., d_x − r, d_φ − r)

        Examples
        --------
        >>> np.round(bl.rtv_basis(fit.theta, 2).block22(problem.theta), 3)  # Θ*'s part RTV cannot hold
        array([[-0.226,  0.   ,  0.   ,  0.   ,  0.   ]])
        """
        r = self.rank
        return self.rotate(theta)[..., r:, r:]

    def to_theta(self, theta_rtv: np.ndarray) -> np.ndarray:
        """Θ = Û [[B₁₁, B₁₂], [B₂₁, 0]] V̂ᵀ from θ_rtv: the inverse of :meth:`to_coordinates` on its range.

        Parameters
        ----------
        theta_rtv : ndarray of shape (..., k)

        Returns
        -------
        ndarray of shape (..., d_x, d_φ)

        Examples
        --------
        >>> basis = bl.rtv_basis(fit.theta, 2)
        >>> np.allclose(basis.to_theta(basis.to_coordinates(fit.theta)), fit.theta)
        True
        """
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

        Parameters
        ----------
        contexts : ndarray of shape (n, d_x)
        features : ndarray of shape (n, d_φ) or (n, A, d_φ)

        Returns
        -------
        ndarray of shape (n, [A,] k)
            z with θ_rtvᵀ z = xᵀ Θ φ for every Θ in the basis's range.

        Examples
        --------
        >>> basis = bl.rtv_basis(fit.theta, 2)
        >>> basis.transform(pop.contexts, pop.features).shape   # units × actions × k
        (50, 4, 16)
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

        Returns
        -------
        list of str
            One per coordinate, in order.

        Examples
        --------
        >>> bl.rtv_basis(fit.theta, 2).labels()[:3]
        ['11 (u0, v0)', '11 (u0, v1)', '11 (u1, v0)']
        """
        return [f"{block} (u{i}, v{j})" for block, i, j in self.entries()]

    def entries(self) -> list[tuple[str, int, int]]:
        """(block, i, j) of each coordinate, in order: the entry (i, j) of Θ' = Ûᵀ Θ V̂ it holds.

        Returns
        -------
        list of (str, int, int)

        Examples
        --------
        >>> bl.rtv_basis(fit.theta, 2).entries()[:2]
        [('11', 0, 0), ('11', 0, 1)]
        """
        r, dx, dp = self.rank, self.d_x, self.d_phi
        return ([("11", i, j) for i in range(r) for j in range(r)]
                + [("12", i, j) for i in range(r) for j in range(r, dp)]
                + [("21", i, j) for i in range(r, dx) for j in range(r)])


def rtv_basis(theta_hat, rank: int) -> RTVBasis:
    """RTV coordinates from the full SVD of a rank-r estimate Θ̂ (d_x × d_φ).

    Parameters
    ----------
    theta_hat : ndarray of shape (d_x, d_φ)
        Θ̂, usually a low-rank fit's (``fit_low_rank(data, r).theta``).
    rank : int
        r, at most min(d_x, d_φ).

    Returns
    -------
    RTVBasis
        Û, V̂ (full orthonormal bases) and r; k = (d_x + d_φ) r − r² coordinates.

    Examples
    --------
    >>> basis = bl.rtv_basis(fit.theta, rank=2)
    >>> basis.dim
    16
    """
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

