"""Rotation–truncation–vectorization (RTV) of the paper.

With full SVD bases Û (d_x × d_x), V̂ (d_φ × d_φ) of a rank-r estimate Θ̂, rotate
Θ' = Ûᵀ Θ V̂ and split it into blocks 11 (r × r), 12 (r × (d_φ−r)),
21 ((d_x−r) × r) and 22. RTV keeps blocks 11, 12, 21, so
θ_rtv ∈ R^k with k = (d_x + d_φ) r − r², and for any feature matrix Z = x φᵀ

    ⟨Z, Θ⟩ = ⟨z_rtv, θ_rtv⟩ + ⟨Z'₂₂, Θ'₂₂⟩.

The truncated block is second order near Θ̂: every rank-r Θ near Θ̂ has
Θ'₂₂ = Θ'₂₁ Θ'₁₁⁻¹ Θ'₁₂ (DESIGN.md, "An identified chart").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import as_float_array, check_rank
from ..uncertainty import broadcast_contexts


@dataclass(frozen=True, eq=False)
class RTVBasis:
    """The rotation (Û, V̂) and rank r that define RTV coordinates; k = (d_x + d_φ) r − r².

    It is a ``Coordinates`` object: sets built on it take x and φ through
    :meth:`transform`.
    """

    left: np.ndarray
    right: np.ndarray
    rank: int

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
        """
        r = self.rank
        xr = broadcast_contexts(contexts @ self.left, features)
        fr = features @ self.right
        lead = fr.shape[:-1]
        b11 = xr[..., :r, None] * fr[..., None, :r]
        b12 = xr[..., :r, None] * fr[..., None, r:]
        b21 = xr[..., r:, None] * fr[..., None, :r]
        return np.concatenate([np.broadcast_to(b, (*lead, *b.shape[-2:])).reshape(*lead, -1)
                               for b in (b11, b12, b21)], axis=-1)


def rtv_basis(theta_hat, rank: int) -> RTVBasis:
    """RTV coordinates from the full SVD of a rank-r estimate Θ̂ (d_x × d_φ)."""
    theta_hat = as_float_array(theta_hat, "theta_hat", 2)
    rank = check_rank(rank, *theta_hat.shape)
    u, _, vt = np.linalg.svd(theta_hat, full_matrices=True)
    return RTVBasis(u, vt.T, rank)
