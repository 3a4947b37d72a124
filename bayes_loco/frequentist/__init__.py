"""The paper's frequentist road: MLE → FGD → RTV → PRS, and GIC rank selection."""

from .bt import BradleyTerryFit, fit_bradley_terry, one_context
from .fgd import LowRankResult, fit_low_rank, spectral_start
from .mle import MLEResult, fit_mle
from .prs import PRSResult, fit_prs
from .rank import RankSelection, select_rank

__all__ = ["BradleyTerryFit", "LowRankResult", "MLEResult", "PRSResult", "RankSelection", "fit_bradley_terry",
           "fit_low_rank", "fit_mle", "fit_prs", "one_context", "select_rank", "spectral_start"]
