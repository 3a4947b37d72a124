"""Files saved before the modules moved load into the moved classes (fixtures in tests/fixtures/format2).

``make_format2.py`` wrote them with the code of commit 984755b: a Posterior when it lived in
bayes/fit.py, a value-sized set whose ValueRadius lived in sets/value.py, the PersonalLLM problem
of bayes_loco/personalllm.py, and the ties, weights and CV fields. Each file must load
and equal the same object rebuilt by today's code.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import pytest
from test_io_security import assert_close, in_rebuilt_signs

import bayes_loco as bl

FIXTURES = Path(__file__).parent / "fixtures"
FORMAT2 = FIXTURES / "format2"
NAMES = ("ties_data", "davidson_mle", "half_prs", "value_set", "policy", "rank_cv", "personalllm")


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("make_format2", FIXTURES / "make_format2.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.objects(tmp_path_factory.mktemp("standin"), with_posterior=False)


@pytest.mark.parametrize("name", NAMES)
def test_a_file_saved_before_the_moves_loads_and_equals_todays_object(rebuilt, name):
    loaded = bl.load(FORMAT2 / f"{name}.nc")
    if name == "personalllm":  # its source names the stand-in's folder, a temporary one each time
        assert loaded.source.startswith("train=") and loaded.source.endswith("pllm-test.csv")
        loaded = dataclasses.replace(loaded, source=rebuilt[name].source)
    if name in ("half_prs", "value_set", "policy"):  # coordinates of the PRS fit's basis (make_format2.py)
        loaded = in_rebuilt_signs(loaded, rebuilt["half_prs"].basis, bl.load(FORMAT2 / "half_prs.nc").basis)
    assert_close(rebuilt[name], loaded, name)


def test_a_posterior_saved_before_the_moves_loads():
    from bayes_loco import bayes

    post = bl.load(FORMAT2 / "posterior.nc")
    assert isinstance(post, bayes.Posterior)
    assert post.ties == "davidson" and post.nu is not None and post.nu > 0
    assert post.method == "map" and post.tree.attrs["rank"] == 2
