"""A fixed ``random_seed`` draws the same posterior draws on a machine's first run as on every later one.

The first fit on a fresh machine compiles the model with empty compile caches; later fits assemble
it from cached pieces. With PyTensor's default numba fastmath flags the two were optimised
differently and NUTS drew other draws (``bayes_loco.bayes.samplers``, "Same seed, same draws"). Each
run here is a fresh process pointed at its own compile-cache folders, first empty, then warm.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np

SCRIPT = textwrap.dedent("""
    import sys, warnings
    import numpy as np
    import bayes_loco as bl
    from bayes_loco import bayes, simulate

    data = simulate.paper_problem(d_s=2, d_a=3, d_x=3, rank=2, seed=0).sample(300, seed=1)
    out = {}
    for sampler in ("pymc", "nutpie"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", bl.SamplerWarning)
            post = bayes.fit_posterior(data, 2, random_seed=5, predictive_draws=0, progressbar=False,
                                       nuts={"draws": 60, "tune": 60, "chains": 2, "cores": 1,
                                             "sampler": sampler, "parametrization": "factored"})
        out[sampler] = post.tree["posterior"]["theta"].values
    np.savez(sys.argv[1], **out)
""")


def _draws(tmp_path, cache, name):
    env = os.environ | {"PYTENSOR_FLAGS": f"base_compiledir={cache / 'pytensor'}",
                        "NUMBA_CACHE_DIR": str(cache / "numba")}
    target = tmp_path / f"{name}.npz"
    subprocess.run([sys.executable, "-c", SCRIPT, str(target)], env=env, check=True, capture_output=True,
                   timeout=900)
    with np.load(target) as draws:
        return {key: draws[key] for key in draws.files}


def test_a_fixed_seed_draws_the_same_draws_with_a_cold_and_a_warm_compile_cache(tmp_path):
    cache = tmp_path / "cache"
    cold = _draws(tmp_path, cache, "cold")
    assert (cache / "pytensor").is_dir() and any((cache / "pytensor").rglob("*"))  # the first run filled it
    warm = _draws(tmp_path, cache, "warm")
    for sampler in ("pymc", "nutpie"):
        assert cold[sampler].shape == (2, 60, 3, 4)
        np.testing.assert_array_equal(cold[sampler], warm[sampler], err_msg=sampler)
    # Two samplers, two trajectories: the check compares draws that depend on the sampler's arithmetic.
    assert not np.array_equal(cold["pymc"], cold["nutpie"])
