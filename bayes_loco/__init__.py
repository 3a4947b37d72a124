"""bayes_loco: low-rank contextual preference learning and pessimistic policies.

The frequentist road of the LoCo-RLHF paper (MLE → FGD → RTV → PRS), the
Bayesian road (``bayes_loco.bayes``, PyMC) and the common pessimistic policy
solver that every uncertainty set feeds.
"""

from . import certify, datasets, simulate
from ._version import __version__ as __version__
from .calibrated import calibrated_policy
from .certify import PolicyCertificate, certify_policies, split_policy
from .config import config_context, get_config, set_config
from .coordinates import Coordinates, RTVBasis, VecCoordinates, rtv_basis
from .crossval import CrossValidation, cross_validate, fold_indices
from .data import PreferenceData
from .datasets import Dataset, read_arena, read_prism
from .decisions import BestActions, best_actions
from .design import identified_directions
from .evaluate import (
    accuracy,
    brier,
    calibration_curve,
    log_loss,
    optimal_value,
    policy_value,
    relative_value,
    score,
    suboptimality,
)
from .exceptions import (
    BayesLocoWarning,
    ConvergenceWarning,
    DataWarning,
    IllConditionedWarning,
    SamplerWarning,
    SeparationWarning,
)
from .frequentist import (
    BradleyTerryFit,
    LowRankResult,
    MLEResult,
    PRSResult,
    RankSelection,
    fit_bradley_terry,
    fit_low_rank,
    fit_mle,
    fit_prs,
    select_rank,
    spectral_start,
)
from .io import load, save
from .policy import (
    Policy,
    ValueBound,
    best_bound_policy,
    greedy_policy,
    pessimistic_policy,
    pessimistic_value,
)
from .population import Population
from .predict import Prediction
from .problems import Problem
from .results import Diagnostics, Fit, FitStatus, Summary
from .sets import (
    Certificate,
    ConvexSet,
    DrawsSet,
    EllipsoidSet,
    ExactProblem,
    ExactSolution,
    FeatureBlocks,
    PolicyStatus,
    QuantileSet,
    UncertaintySet,
    ValueFamilySet,
    value_family,
    wald_set,
)


def __getattr__(name: str):
    # The Bayesian road imports PyMC (seconds), the studies and plots matplotlib: load them on first use only.
    if name in ("bayes", "experiments", "plots"):
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'bayes_loco' has no attribute {name!r}")


__all__ = [
    "BayesLocoWarning",
    "BestActions",
    "BradleyTerryFit",
    "Certificate",
    "ConvergenceWarning",
    "ConvexSet",
    "Coordinates",
    "CrossValidation",
    "DataWarning",
    "Dataset",
    "Diagnostics",
    "DrawsSet",
    "EllipsoidSet",
    "ExactProblem",
    "ExactSolution",
    "FeatureBlocks",
    "Fit",
    "FitStatus",
    "IllConditionedWarning",
    "LowRankResult",
    "MLEResult",
    "PRSResult",
    "Policy",
    "PolicyCertificate",
    "PolicyStatus",
    "Population",
    "Prediction",
    "PreferenceData",
    "Problem",
    "QuantileSet",
    "RTVBasis",
    "RankSelection",
    "SamplerWarning",
    "SeparationWarning",
    "Summary",
    "UncertaintySet",
    "ValueBound",
    "ValueFamilySet",
    "VecCoordinates",
    "accuracy",
    "best_actions",
    "best_bound_policy",
    "brier",
    "calibrated_policy",
    "calibration_curve",
    "certify",
    "certify_policies",
    "config_context",
    "cross_validate",
    "datasets",
    "fit_bradley_terry",
    "fit_low_rank",
    "fit_mle",
    "fit_prs",
    "fold_indices",
    "get_config",
    "greedy_policy",
    "identified_directions",
    "load",
    "log_loss",
    "optimal_value",
    "pessimistic_policy",
    "pessimistic_value",
    "policy_value",
    "read_arena",
    "read_prism",
    "relative_value",
    "rtv_basis",
    "save",
    "score",
    "select_rank",
    "set_config",
    "simulate",
    "spectral_start",
    "split_policy",
    "suboptimality",
    "value_family",
    "wald_set",
]
