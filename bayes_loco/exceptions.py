"""Warning classes of bayes_loco; one base class so a single filter silences all."""


class BayesLocoWarning(UserWarning):
    """Base class of every warning this package emits."""


class ConvergenceWarning(BayesLocoWarning):
    """An optimiser stopped before its convergence criterion was met."""


class SeparationWarning(BayesLocoWarning):
    """The data are (quasi-)separable: the unpenalised MLE runs off to infinity."""


class IllConditionedWarning(BayesLocoWarning):
    """A Gram or information matrix is singular or nearly so."""


class SamplerWarning(BayesLocoWarning):
    """A posterior sampler reported divergences or poor mixing."""


class DataWarning(BayesLocoWarning):
    """The data are valid but look unlike what was probably meant (e.g. labels all of one class)."""
