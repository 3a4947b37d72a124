"""Dimension, variable and group names of the Bayesian road, in one place.

Every PyMC variable and every DataTree variable of :mod:`bayes_loco.bayes`
declares its dims with these names, so ArviZ selections (``sel``,
``var_names``) and ``pm.set_data`` calls never depend on spelling. The names the
frequentist trees share (:mod:`bayes_loco.trees`) are defined there.
"""

from __future__ import annotations

from ..trees import (
    BLOCK,
    COMPARISON,
    CONTEXT,
    CONTEXT_DIRECTION,
    FACTORS,
    FEATURE,
    FEATURE_DIRECTION,
    ITERATION,
    LOSS,
    OBSERVED,
    OBSERVED_DATA,
    OPTIMIZER_RESULT,
    POINT_ESTIMATE,
    POSTERIOR,
    POSTERIOR_PREDICTIVE,
    PREFERENCE_PROBABILITY,
    PRIOR,
    PROBABILITY,
    RANK,
    RTV_COORD,
    SAMPLE_STATS,
    THETA,
    THETA_RTV,
    VI_LOSS,
)
from ..trees import IDENTIFIED as IDENTIFIED_COORD

#: Names of the model's data containers (``pm.set_data`` keys); Davidson's model and weights
#: (:mod:`bayes_loco.bayes.ties`) add the weights and log ν₀, the start of log ν.
DATA_CONTEXTS = "contexts"
DATA_DIFFERENCES = "differences"
DATA_LABELS = "labels"
DATA_WEIGHTS = "weights"
DATA_NU_START = "log_nu_start"
#: The containers of X and ΔΦ read as distinct rows and an index per comparison
#: (:mod:`bayes_loco.bayes.margins`, ``group_rows=True``), and the dims of the distinct rows.
DATA_CONTEXT_ROWS = "context_rows"
DATA_CONTEXT_INDEX = "context_index"
DATA_DIFFERENCE_ROWS = "difference_rows"
DATA_DIFFERENCE_INDEX = "difference_index"
CONTEXT_ROW = "context_row"
DIFFERENCE_ROW = "difference_row"

#: Names of the model's variables.
LEFT = "U"
RIGHT = "V"
MARGINS = "eta"
LEFT_SCALE = "sigma_U"
RIGHT_SCALE = "sigma_V"
BALANCE = "balance"
#: Davidson's tie parameter ν (a Deterministic; the tree's ``posterior``) and the sampler's
#: coordinate log ν − log ν₀ (:mod:`bayes_loco.bayes.ties`).
NU = "nu"
NU_SHIFT = "log_nu_shift"

#: The group :meth:`~bayes_loco.bayes.Posterior.with_log_likelihood` adds (:mod:`bayes_loco.bayes.loocv`).
LOG_LIKELIHOOD = "log_likelihood"

#: Names of the chart parametrisation's variables and dims (:mod:`bayes_loco.bayes.chart`).
CHART_Z = "chart_z"
CHART_LOG_DIAG = "chart_log_diag"
CHART_LOWER = "chart_lower"
CHART_PRIOR = "chart_prior"
LEFT_NULL = "U_null"
RIGHT_NULL = "V_null"
CHART_WEAK_LEFT = "chart_weak_U"
CHART_WEAK_RIGHT = "chart_weak_V"
CHART_WEAK_TOP = "chart_weak_top"
CHART_WEAK_LOG_DIAG = "chart_weak_log_diag"
CHART_WEAK_FIRST = "chart_weak_first"
CHART_WEAK_UPPER = "chart_weak_upper"
CHART_COORD = "chart_coord"
CHART_RANK = "chart_rank"
WEAK_RANK = "weak_rank"
WEAK_LEAD = "weak_lead"
CONTEXT_REST = "context_rest"
CONTEXT_WEAK_REST = "context_weak_rest"
WEAK_PAIR = "weak_pair"
FEATURE_REST = "feature_rest"
RANK_PAIR = "rank_pair"
CONTEXT_NULL = "context_null"
FEATURE_NULL = "feature_null"

#: The quantities that are identified by the likelihood and are diagnosed
#: (R-hat, ESS); U and V are not (rotations U R, V R give the same Θ). They
#: are the variables of the tree's ``posterior`` group; U and V are in ``factors``.
IDENTIFIED = (THETA, THETA_RTV)

__all__ = [
    "BALANCE", "BLOCK", "CHART_COORD", "CHART_LOG_DIAG", "CHART_LOWER", "CHART_PRIOR", "CHART_RANK",
    "CHART_WEAK_FIRST", "CHART_WEAK_LEFT", "CHART_WEAK_LOG_DIAG", "CHART_WEAK_RIGHT", "CHART_WEAK_TOP",
    "CHART_WEAK_UPPER",
    "CHART_Z", "COMPARISON", "CONTEXT", "CONTEXT_DIRECTION", "CONTEXT_NULL", "CONTEXT_REST",
    "CONTEXT_ROW", "CONTEXT_WEAK_REST", "DATA_CONTEXTS", "DATA_CONTEXT_INDEX", "DATA_CONTEXT_ROWS",
    "DATA_DIFFERENCES", "DATA_DIFFERENCE_INDEX", "DATA_DIFFERENCE_ROWS", "DATA_LABELS", "DATA_NU_START",
    "DATA_WEIGHTS", "DIFFERENCE_ROW", "FACTORS", "FEATURE", "FEATURE_DIRECTION", "FEATURE_NULL",
    "FEATURE_REST", "IDENTIFIED", "IDENTIFIED_COORD", "ITERATION", "LEFT", "LEFT_NULL", "LEFT_SCALE",
    "LOG_LIKELIHOOD", "LOSS", "MARGINS", "NU", "NU_SHIFT", "OBSERVED", "OBSERVED_DATA",
    "OPTIMIZER_RESULT", "POINT_ESTIMATE", "POSTERIOR", "POSTERIOR_PREDICTIVE", "PREFERENCE_PROBABILITY",
    "PRIOR", "PROBABILITY", "RANK", "RANK_PAIR", "RIGHT", "RIGHT_NULL", "RIGHT_SCALE", "RTV_COORD",
    "SAMPLE_STATS", "THETA", "THETA_RTV", "VI_LOSS", "WEAK_LEAD", "WEAK_PAIR", "WEAK_RANK",
]
