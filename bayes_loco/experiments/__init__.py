"""Studies of the paper and beyond: methods, problems, study definitions, a resumable runner and figures.

- :data:`METHODS` (name → :class:`MethodSpec`: fit, set, objective) and the
  fitters of :data:`FITTERS` make every method's policy through the one solver;
  :func:`compare_policies` runs them on your data, :func:`run_methods` on a
  study's task.
- :data:`PROBLEMS` maps a problem name to its builder; :data:`STUDIES` maps a
  study name to its :class:`Study` (a grid of settings on one problem).
- :func:`run_study` runs a study resumably on any executor (each task is
  :func:`task_inputs`, the simulated data and populations, then :func:`run_task`'s
  methods) under a lock on its folder (:func:`output_lock`), refusing settings the
  study does not use (:func:`check_overrides`); :func:`read_results` reads its CSV
  (mending a torn last line), :func:`summarise`,
  :func:`plot_results` and :func:`plot_calibration` (:mod:`.figures`, with the coverage
  :func:`calibration` it draws) report it.
- Two studies of their own shape: :mod:`.frontier` (the shift study's global policy at
  fixed radii, ``bayes-loco frontier``) and :mod:`.heldout` (user-grouped cross-validation
  without a truth, ``bayes-loco heldout``).
"""

from .columns import COLUMNS
from .figures import calibration, plot_calibration, plot_results, summarise
from .methods import (
    COMPARE_METHODS,
    DEFAULT_METHODS,
    FITTERS,
    METHODS,
    Fits,
    Fitter,
    MethodSpec,
    compare_policies,
    run_methods,
)
from .posterior_settings import POSTERIOR_DEFAULTS, posterior_settings
from .problems import PROBLEMS, build_problem
from .runner import (
    SettingError,
    TaskInputs,
    check_overrides,
    output_lock,
    run_study,
    run_task,
    study_settings,
    task_inputs,
    task_seed,
)
from .store import OutputBusyError, OutputFolderError, read_results
from .studies import STUDIES, Study

__all__ = ["COLUMNS", "COMPARE_METHODS", "DEFAULT_METHODS", "FITTERS", "METHODS", "POSTERIOR_DEFAULTS",
           "PROBLEMS", "STUDIES", "Fits", "Fitter", "MethodSpec", "OutputBusyError", "OutputFolderError",
           "SettingError", "Study", "TaskInputs", "build_problem", "calibration", "check_overrides",
           "compare_policies", "output_lock", "plot_calibration", "plot_results", "posterior_settings",
           "read_results", "run_methods", "run_study", "run_task", "study_settings", "summarise",
           "task_inputs", "task_seed"]
