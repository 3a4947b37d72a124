"""A posterior at LLM-like width (k = 4,000) takes its penalty set's Gram from ``design.information`` (#35).

``Posterior.penalty_set`` reads only the posterior's basis, data and estimate, so it is called on a
stand-in holding those at d_x = 2, d_φ = 2,000, r = 2, without sampling a posterior: the Gram matrix
comes from the function the Wald sets use, which sums the design a block of rows at a time.
"""

from __future__ import annotations

import tracemalloc
from types import SimpleNamespace

import numpy as np
import pytest

import bayes_loco as bl
from bayes_loco import design as design_module
from bayes_loco.bayes import Posterior, posterior


def _wide(n: int, seed: int = 0, d_phi: int = 2000):
    rng = np.random.default_rng(seed)
    d_x, rank = 2, 2
    data = bl.PreferenceData(rng.standard_normal((n, d_x)), rng.standard_normal((n, d_phi)),
                             rng.integers(0, 2, n), copy=False)
    basis = bl.rtv_basis(rng.standard_normal((d_x, rank)) @ rng.standard_normal((rank, d_phi)), rank)
    assert basis.dim == 2 * d_phi
    return data, basis


def test_the_posterior_penalty_set_takes_its_gram_from_design_information(monkeypatch):
    # k = 400 above a gram_panel of 256: W is summed on the Kronecker path, as at LLM width, with a
    # k × k matrix factorised in a second or two (at d_φ = 2,000, k = 4,000, half a minute).
    bl.set_config(gram_panel=256)
    data, basis = _wide(300, d_phi=200)
    calls = []

    def spy(coordinates, d, weights=None):
        calls.append((coordinates, d))
        return design_module.information(coordinates, d, weights)

    monkeypatch.setattr(posterior, "information", spy)
    stand_in = SimpleNamespace(basis=basis, data=data, estimate=np.zeros(basis.dim))
    penalty = Posterior.penalty_set(stand_in, 5.0)
    assert calls == [(basis, data)]
    assert penalty.center.shape == (basis.dim,)
    rows = data.subset(slice(0, 5))
    z = design_module.design(basis, rows)
    np.testing.assert_allclose(design_module.information(basis, rows), z.T @ z, rtol=1e-10, atol=1e-10)


def _peak_bytes(basis, data) -> int:
    tracemalloc.start()
    try:
        design_module.information(basis, data)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _fixed(basis) -> float:
    """Bytes of W (k²), of the r(r+1)/2 pair sums (upper triangles by column panels of d_φ × d_φ)
    and of one d_φ × d_φ being mirrored (numpy copies a panel of rows of an array mirrored onto itself):
    what any N needs besides its blocks of rows."""
    k, r, dp, width = basis.dim, basis.rank, basis.d_phi, bl.get_config()["pair_panel"]
    panels = sum(min(lo + width, dp) * (min(lo + width, dp) - lo) for lo in range(0, dp, width))
    return 8.0 * (k * k + r * (r + 1) // 2 * panels + dp * dp + bl.get_config()["mirror_panel"] * k)


def test_information_memory_does_not_grow_with_n_on_the_kronecker_path(monkeypatch):
    # At k = 400 with the Kronecker path forced and a 4 MB block, the blocks' temporaries dominate the
    # peak (W is 1.3 MB) and N = 6,000 is seven blocks; the slow test below runs LLM-like sizes.
    bl.set_config(design_block_bytes=4 * 1024**2)
    bl.set_config(gram_panel=256)
    data, basis = _wide(6000, d_phi=200)
    small, large = _peak_bytes(basis, data.subset(slice(0, 3000))), _peak_bytes(basis, data)
    block = bl.get_config()["design_block_bytes"]
    assert large - small <= 0.25 * block  # where the last, partial block ends; N × k grows by 3.4 blocks
    assert large - _fixed(basis) <= 1.1 * block


@pytest.mark.slow
def test_information_memory_is_flat_in_n_at_llm_width():
    data, basis = _wide(40_000)
    peaks = [_peak_bytes(basis, data.subset(slice(0, n))) for n in (20_000, 40_000)]
    # N × k would be 640 MB and 1.3 GB here: the peak is W, the pair sums and one block, whatever N
    block = bl.get_config()["design_block_bytes"]
    assert peaks[1] - peaks[0] <= 0.25 * block
    assert max(peaks) - _fixed(basis) <= 1.1 * block
