"""A posterior at LLM-like width (k = 4,000) takes its penalty set's Gram from ``design.information`` (#35).

``Posterior.penalty_set`` reads only the posterior's basis, data and estimate, so it is called on a
stand-in holding those at d_x = 2, d_φ = 2,000, r = 2, without sampling a posterior: the Gram matrix
comes from the function the Wald sets use, which sums the design a block of rows at a time.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

import bayes_loco as bl
from bayes_loco import design as design_module
from bayes_loco.bayes import Posterior, posterior


def _wide(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    d_x, d_phi, rank = 2, 2000, 2
    data = bl.PreferenceData(rng.standard_normal((n, d_x)), rng.standard_normal((n, d_phi)),
                             rng.integers(0, 2, n), copy=False)
    basis = bl.rtv_basis(rng.standard_normal((d_x, rank)) @ rng.standard_normal((rank, d_phi)), rank)
    assert basis.dim == 4000
    return data, basis


def test_the_posterior_penalty_set_takes_its_gram_from_design_information(monkeypatch):
    data, basis = _wide(300)
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
