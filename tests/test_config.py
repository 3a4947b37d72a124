"""The switchboard: every tuning number is a documented setting, read where it takes effect."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

import numpy as np
import pytest

import bayes_loco as bl
from bayes_loco import config

PACKAGE = Path(bl.__file__).resolve().parent


def test_get_set_and_context_restore():
    default = config.SETTINGS["newton_max"].default
    assert bl.get_config()["newton_max"] == default
    with bl.config_context(newton_max=3, feature_block_bytes=1):
        assert bl.get_config()["newton_max"] == 3 and bl.get_config()["feature_block_bytes"] == 1
        bl.set_config(newton_max=4)
        assert bl.get_config()["newton_max"] == 4
    assert bl.get_config()["newton_max"] == default
    copy = bl.get_config()
    copy["newton_max"] = -1  # a copy: changing it changes nothing
    assert bl.get_config()["newton_max"] == default


@pytest.mark.parametrize("settings, message", [
    ({"newton_maks": 3},
     r"^'newton_maks' is not a setting of bayes_loco.config \(did you mean 'newton_max'\?\)"),
    ({"newton_max": 2.5}, r"^newton_max must be an int like its default 1000, got 2.5$"),
    ({"snr_chart": "20"}, r"^snr_chart must be a real number like its default 20.0, got '20'$"),
    ({"watch_draws": (50,)}, r"^watch_draws must be a tuple of 2 integers like its default \(50, 150\)"),
    ({"watch_draws": (50.0, 150.5)}, r"^watch_draws must be a tuple of 2 integers like its default"),
    ({"watch_poll": (0.5, "4")}, r"^watch_poll must be a tuple of 2 numbers like its default"),
    ({"chunk": True}, r"^chunk must be an int like its default 20000, got True$"),
])
def test_bad_settings_are_refused_naming_the_setting(settings, message):
    before = bl.get_config()
    with pytest.raises(TypeError, match=message):
        bl.set_config(**settings)
    assert bl.get_config() == before  # nothing half-set


@pytest.mark.parametrize("settings, message", [
    ({"chunk": 0}, r"^chunk must be > 0, got 0 \(its default is 20000\)$"),
    ({"snr_chart": -1.0}, r"^snr_chart must be >= 0, got -1.0"),
    ({"snr_chart": float("nan")}, r"^snr_chart must be >= 0, got nan"),
    ({"retry_target_accept": 1.0}, r"^retry_target_accept must be in \(0, 1\), got 1.0"),
    ({"aggregate_share": 1.5}, r"^aggregate_share must be in \[0, 1\], got 1.5"),
    ({"compression_level": 10}, r"^compression_level must be in 0 … 9, got 10"),
    ({"target_accept_steps": (0.9, 1.2)}, r"^target_accept_steps's entries must each be in \(0, 1\)"),
    ({"watch_draws": (150, 50)}, r"^watch_draws's entries must increase, got \(150, 50\)"),
    ({"newton_max": 5, "gap_min": 0.5}, r"^gap_min must be >= 1, got 0.5"),
])
def test_values_outside_a_settings_domain_are_refused_naming_it(settings, message):
    before = bl.get_config()
    with pytest.raises(ValueError, match=message):
        bl.set_config(**settings)
    with pytest.raises(ValueError, match=message), bl.config_context(**settings):
        pass
    assert bl.get_config() == before  # nothing half-set, by either


def test_numpy_scalars_are_taken_and_stored_as_the_defaults_types():
    """A number computed with NumPy is a setting's value as well as Python's own, and what is stored
    has the default's type (an int given for a float setting is stored as a float)."""
    given = {"chunk": np.int64(1000), "max_abs": np.float32(1e6), "retry_target_accept": np.float64(0.97),
             "snr_chart": 5, "watch_draws": [0, np.int32(5)], "target_accept_steps": (np.float64(0.9), 1)}
    stored = {"chunk": 1000, "max_abs": 1e6, "retry_target_accept": 0.97, "snr_chart": 5.0,
              "watch_draws": (0, 5), "target_accept_steps": (0.9, 1.0)}
    with pytest.raises(ValueError, match=r"^target_accept_steps's entries must each be in \(0, 1\)"):
        bl.set_config(**given)  # the last entry, 1, lies outside (0, 1) whatever its type
    given["target_accept_steps"] = (np.float64(0.9), np.float32(0.99))
    stored["target_accept_steps"] = (0.9, float(np.float32(0.99)))
    with bl.config_context(**given):
        now = bl.get_config()
        for name, value in stored.items():
            assert now[name] == value and type(now[name]) is type(config.SETTINGS[name].default)
            if isinstance(value, tuple):
                assert [type(v) for v in now[name]] == [type(v) for v in config.SETTINGS[name].default]


def test_every_default_lies_in_its_domain_and_every_setting_refuses_a_negative():
    for name, setting in config.SETTINGS.items():
        with bl.config_context(**{name: setting.default}):
            assert bl.get_config()[name] == setting.default
        default = setting.default
        negative = (tuple(-1 for _ in default) if isinstance(default, tuple)
                    else -1 if isinstance(default, int) else -1.0)
        with pytest.raises(ValueError, match=f"^{name}"):
            bl.set_config(**{name: negative})
    edges = {"newton_max": 0, "slack": 0, "cache_size": 0, "snr_chart": 0.0, "aggregate_share": 1.0,
             "range_rtol": 0.0, "max_abs": float("inf"), "compression_level": 0, "watch_draws": (0, 1)}
    with bl.config_context(**edges):  # the domains' closed ends are accepted
        assert all(bl.get_config()[name] == value for name, value in edges.items())


def test_a_thread_starts_from_the_global_defaults():
    seen = {}
    with bl.config_context(newton_max=7):
        worker = threading.Thread(target=lambda: seen.update(bl.get_config()))
        worker.start()
        worker.join()
    assert seen["newton_max"] == config.SETTINGS["newton_max"].default


def test_every_setting_says_what_it_trades_and_where_it_is_read():
    for name, setting in config.SETTINGS.items():
        assert len(setting.doc) > 20, name
        module = PACKAGE.parent.joinpath(*setting.module.split(".")).with_suffix(".py")
        if not module.exists():
            module = module.with_suffix("") / "__init__.py"
        assert f'"{name}"' in module.read_text() or f"'{name}'" in module.read_text(), (name, module)


def _numeric(node) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp):
        return _numeric(node.operand)
    if isinstance(node, ast.BinOp):
        return _numeric(node.left) and _numeric(node.right)
    return isinstance(node, ast.Tuple) and bool(node.elts) and all(_numeric(e) for e in node.elts)


def test_at_most_ten_numeric_constants_outside_the_switchboard():
    """Module-level numbers outside config.py are constants of mathematics or of a format (file format
    version, exit codes, the simulation's design, a seed stream), at most ten of them."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "config.py":
            continue
        for node in ast.parse(path.read_text()).body:
            target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
            value = getattr(node, "value", None)
            if isinstance(target, ast.Name) and target.id.isupper() and value is not None and _numeric(value):
                found.append(f"{path.relative_to(PACKAGE)}:{target.id}")
    assert len(found) <= 10, found


def test_a_setting_takes_effect_where_it_is_read(random_low_rank_problem):
    """The exact objective by the first-order methods where ``newton_max`` is 0, by Newton by default; the
    same certified value either way."""
    fit = bl.fit_prs(random_low_rank_problem.data, 2)
    rng = np.random.default_rng(3)
    pop = bl.Population(rng.standard_normal((40, 4)), rng.standard_normal((40, 3, 5)), np.arange(40) % 8)
    newton = bl.pessimistic_policy(fit.calibrated_set(0.9), pop, objective="exact", tol=1e-6)
    with bl.config_context(newton_max=0, newton_fallback_max=0):
        first = bl.pessimistic_policy(fit.calibrated_set(0.9), pop, objective="exact", tol=1e-6)
    assert "accelerated" in first.message and "accelerated" not in newton.message
    assert first.certificate.lower <= newton.certificate.upper + 1e-9
    assert newton.certificate.lower <= first.certificate.upper + 1e-9
    chosen = bl.pessimistic_policy(fit.calibrated_set(0.9), pop, objective="exact", tol=1e-6,
                                   solver="first-order")
    assert "accelerated" in chosen.message or chosen.certificate.relative_gap < 1e-6
    with pytest.raises(ValueError, match=r"^solver must be one of 'auto', 'newton', 'first-order'"):
        bl.pessimistic_policy(fit.calibrated_set(0.9), pop, objective="exact", solver="lbfgs")
