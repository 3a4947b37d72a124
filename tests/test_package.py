"""The top-level namespace: the curated API and the lazily loaded Bayesian road."""

import subprocess
import sys

import pytest

import bayes_loco as bl


def test_issue_api_is_at_the_top_level():
    names = ("PreferenceData", "fit_mle", "fit_low_rank", "fit_prs", "pessimistic_policy", "suboptimality",
             "select_rank", "simulate")
    for name in names:
        assert hasattr(bl, name), name
    assert set(bl.__all__) <= set(dir(bl))


def test_bayes_is_loaded_on_first_use_only():
    code = ("import sys, bayes_loco as bl; a = 'pymc' in sys.modules; bl.bayes; "
            "print(a, 'pymc' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True"]
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        bl.nothing  # noqa: B018
