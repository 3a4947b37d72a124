"""The posterior's settings in a study: flat ``posterior_<group>_<field>`` settings and their defaults."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

# fit_posterior's settings that come in groups (its arguments nuts, prior, vi), and their defaults here.
POSTERIOR_GROUPS = ("nuts", "prior", "vi")
#: The posterior settings of the studies' tasks: 4 chains × (500 + 500) on one core each.
POSTERIOR_DEFAULTS: dict[str, dict] = {"nuts": {"draws": 500, "tune": 500, "chains": 4, "cores": 1}}
# fit_posterior's ungrouped settings that a study may set (posterior_method=vi).
POSTERIOR_KEYWORDS = ("method",)
POSTERIOR_PREFIX = "posterior_"


def posterior_settings(settings: Mapping) -> dict:
    """fit_posterior's settings from a study's flat ``posterior_<group>_<field>`` settings.

    ``{"posterior_nuts_sampler": "numpyro", "posterior_nuts_draws": 200,
    "posterior_prior_scale": 2, "n": 3000}`` gives ``{"nuts": {"sampler":
    "numpyro", "draws": 200}, "prior": {"scale": 2}}``; groups are
    :data:`POSTERIOR_GROUPS`, and ``posterior_method`` sets the method. Other
    settings are ignored.

    Parameters
    ----------
    settings : Mapping
        A task's settings.

    Returns
    -------
    dict
        ``fit_posterior``'s keyword arguments.

    Raises
    ------
    ValueError
        A ``posterior_*`` setting that is neither, naming it.

    Examples
    --------
    >>> from bayes_loco import experiments as ex
    >>> ex.posterior_settings({"posterior_nuts_draws": 200, "posterior_prior_scale": 2, "n": 3000})
    {'nuts': {'draws': 200}, 'prior': {'scale': 2}}
    """
    out: dict = {}
    for key, value in settings.items():
        if not key.startswith(POSTERIOR_PREFIX):
            continue
        name = key.removeprefix(POSTERIOR_PREFIX)
        group, _, field = name.partition("_")
        if group in POSTERIOR_GROUPS and field:
            out.setdefault(group, {})[field] = value
        elif name in POSTERIOR_KEYWORDS:
            out[name] = value
        else:
            raise ValueError(
                f"setting {key!r}: posterior settings are posterior_<group>_<field> with group in "
                f"{', '.join(POSTERIOR_GROUPS)} (e.g. posterior_nuts_draws=200, "
                f"posterior_nuts_sampler=numpyro, posterior_prior_scale=2) or "
                f"posterior_{'/'.join(POSTERIOR_KEYWORDS)}")
    return out


def posterior_arguments(posterior: Mapping | None) -> dict:
    """``posterior`` (fit_posterior's keyword arguments) over :data:`POSTERIOR_DEFAULTS`, group by group.

    A group given as a dict is merged into its defaults; one given as a
    dataclass (``NUTS(...)``) is taken whole.
    """
    out = dict(posterior or {})
    for group, defaults in POSTERIOR_DEFAULTS.items():
        given = out.get(group)
        if given is None:
            out[group] = dict(defaults)
        elif isinstance(given, Mapping):
            out[group] = defaults | dict(given)
        elif not dataclasses.is_dataclass(given):
            raise TypeError(f"posterior[{group!r}] must be a dict or a dataclass of fit_posterior's "
                            f"{group} settings, got {type(given).__name__}")
    return out
