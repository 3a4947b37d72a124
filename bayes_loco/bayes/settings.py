"""The prior settings group of the Bayesian road, and how every settings group is read.

:func:`~bayes_loco.bayes.fit_posterior` takes its settings in groups, each a frozen
dataclass that also accepts a dict of its fields (:func:`settings_group`). The
sampler's groups (``NUTS``, ``MAP``, ``VI``) live beside the fit in
:mod:`bayes_loco.bayes.fit`; the prior is here, where the model builders
(:mod:`.model`, :mod:`.chart`) read it without importing the fit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from .._validation import check_real


def _set(obj, name, value) -> None:
    object.__setattr__(obj, name, value)


@dataclass(frozen=True)
class Prior:
    """The prior of :func:`~bayes_loco.bayes.build_model` (see there for what each setting does).

    Attributes
    ----------
    scale : float
        s > 0: the prior standard deviation of the factor entries U_ik, V_jk,
        or the scale of their HalfNormal hyper-prior.
    hyper : bool
        HalfNormal(``scale``) hyper-priors on the factor scales s_U, s_V.
    balance : float
        c ≥ 0 of the balancing potential −(c/8)‖UᵀU − VᵀV‖²_F (0: free factors).
    nu_scale : float or None
        σ_ν > 0 of the prior of Davidson's tie parameter, log ν ~ N(0, σ_ν²)
        (:mod:`bayes_loco.bayes.ties`); None for the models without ν. A model
        with this prior is Davidson's: ``fit_posterior(..., ties="davidson")``
        sets it to :data:`~bayes_loco.bayes.ties.NU_SCALE` when it is None.
    """

    scale: float = 1.0
    hyper: bool = False
    balance: float = 0.0
    nu_scale: float | None = None

    def __post_init__(self):
        _set(self, "scale", check_real(self.scale, "prior.scale", 0.0, low_open=True))
        if not isinstance(self.hyper, bool):
            raise TypeError(f"prior.hyper must be a bool, got {self.hyper!r}")
        _set(self, "balance", check_real(self.balance, "prior.balance", 0.0))
        if self.nu_scale is not None:
            _set(self, "nu_scale", check_real(self.nu_scale, "prior.nu_scale", 0.0, low_open=True))


def settings_group(value, cls, name: str):
    """``value`` as a ``cls`` settings group: an instance, a dict of its fields, or None (the defaults).

    Raises one ValueError naming the group, the unknown keys and the known ones,
    and ``cls``'s own errors (``"nuts.draws must be >= 1"``) for bad values.
    """
    if value is None:
        return cls()
    if isinstance(value, cls):
        return value
    if isinstance(value, Mapping):
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = [key for key in value if key not in known]
        if unknown:
            raise ValueError(f"{name} has no setting {', '.join(map(repr, unknown))}; the {name} settings "
                             f"are {', '.join(known)}")
        return cls(**value)
    raise TypeError(f"{name} must be a {cls.__name__}, a dict of its settings or None, "
                    f"got {type(value).__name__}")


def prior_record(prior: Prior) -> dict:
    """The prior as a fit's settings record it: its fields, without ``nu_scale`` when there is no ν.

    A fit without a tie parameter records exactly the fields it recorded before ν
    existed, so its settings (and the files that store them) are unchanged.
    """
    record = dataclasses.asdict(prior)
    if prior.nu_scale is None:
        del record["nu_scale"]
    return record
