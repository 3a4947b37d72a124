"""Studies of the paper and beyond: definitions, a resumable runner and figures."""

from .methods import DEFAULT_METHODS, METHODS, run_methods
from .plots import calibration, plot_calibration, plot_results
from .runner import run_study, run_task, summarise, task_seed
from .studies import STUDIES, Study

__all__ = ["DEFAULT_METHODS", "METHODS", "STUDIES", "Study", "calibration", "plot_calibration",
           "plot_results", "run_methods", "run_study", "run_task", "summarise", "task_seed"]
