"""The file format's vocabulary: its attribute names and the registry of type tags, as strings.

Below both :mod:`bayes_loco._ioformat` (which reads a file and imports a registered class by its
name, on first use) and the writer :mod:`bayes_loco._iowrite` (which every result's ``save``
reaches): the registry names classes by ``"module:QualName"``, so nothing here imports them.
"""

from __future__ import annotations

FORMAT_VERSION = 2
"""The version of the file layout this module writes; it reads this one and format 1."""

ENGINE = "h5netcdf"
POSTERIOR_GROUP = "bayes_loco"

FORMAT_KEY = "bayes_loco_format"
TYPE_KEY = "bayes_loco_type"
VERSION_KEY = "bayes_loco_version"
KIND_KEY = "bayes_loco_kind"
REF_KEY = "bayes_loco_ref"
SEQUENCE_KEY = "bayes_loco_sequence"
LENGTH_KEY = "bayes_loco_length"
SCALAR_KEY = "bayes_loco_scalar"
DTYPE_KEY = "bayes_loco_dtype"
ATTRS_KEY = "bayes_loco_attrs"
FIELDS_KEY = "fields"
RESERVED_PREFIX = "bayes_loco_"
POSTERIOR = "Posterior"

TYPES: dict[str, str] = {
    "PreferenceData": "bayes_loco.data:PreferenceData",
    "Population": "bayes_loco.population:Population",
    "Units": "bayes_loco.population:Units",
    "VecCoordinates": "bayes_loco.coordinates:VecCoordinates",
    "RTVBasis": "bayes_loco.coordinates:RTVBasis",
    "EllipsoidSet": "bayes_loco.sets.ellipsoid:EllipsoidSet",
    "DrawsSet": "bayes_loco.sets.hull:DrawsSet",
    "QuantileSet": "bayes_loco.sets.quantile:QuantileSet",
    "ValueFamilySet": "bayes_loco.sets.family:ValueFamilySet",
    "ValueRadius": "bayes_loco.sets.base:ValueRadius",
    "Certificate": "bayes_loco.sets.base:Certificate",
    "ExactSolution": "bayes_loco.sets.base:ExactSolution",
    "PolicyStatus": "bayes_loco.sets.base:PolicyStatus",
    "Policy": "bayes_loco.policy:Policy",
    "Diagnostics": "bayes_loco.results:Diagnostics",
    "Summary": "bayes_loco.results:Summary",
    "FitStatus": "bayes_loco.results:FitStatus",
    "MLEResult": "bayes_loco.frequentist.mle:MLEResult",
    "LowRankResult": "bayes_loco.frequentist.fgd:LowRankResult",
    "PRSResult": "bayes_loco.frequentist.prs:PRSResult",
    "RankSelection": "bayes_loco.frequentist.rank:RankSelection",
    "Posterior": "bayes_loco.bayes.posterior:Posterior",
    "PaperProblem": "bayes_loco.simulate:PaperProblem",
    "PersonalLLMProblem": "bayes_loco.datasets.personalllm:PersonalLLMProblem",
}
"""The registry of the classes a file may hold: type tag → ``"module:QualName"`` of the class.

Files name classes by tag, so a class may move to another module: change its
entry here, and teach :func:`_format_1_tag` its old name. The module is imported
only when a file names the tag (loading a frequentist fit does not import PyMC).
"""

LOCATIONS: dict[str, str] = {location: tag for tag, location in TYPES.items()}
# Format-1 names ("module:QualName") of classes that have moved since: old name → tag.
MOVED: dict[str, str] = {"bayes_loco.personalllm:PersonalLLMProblem": "PersonalLLMProblem",
                         "bayes_loco.bayes.fit:Posterior": "Posterior",
                         "bayes_loco.sets.value:ValueRadius": "ValueRadius",
                         "bayes_loco.data:Population": "Population", "bayes_loco.data:Units": "Units"}

SUPPORTED = ("PreferenceData, Population, coordinates (VecCoordinates, RTVBasis), uncertainty sets "
             "(EllipsoidSet, DrawsSet, QuantileSet, ValueFamilySet), Policy, fits (MLEResult, LowRankResult, "
             "PRSResult, Posterior), RankSelection and the problems (PaperProblem, PersonalLLMProblem)")

# What a damaged or crafted file can make h5py, xarray, NumPy or json raise while it is read and
# decoded; load turns each into one ValueError naming the file. Not Exception: a bug of this module
# (NameError, …) must not pass for a damaged file.
READ_ERRORS = (OSError, KeyError, IndexError, TypeError, ValueError, AttributeError, RuntimeError,
               ArithmeticError)


def tag_of(cls, where: str) -> str:
    """The type tag of ``cls`` (a class of the registry); TypeError for any other class."""
    tag = LOCATIONS.get(f"{cls.__module__}:{cls.__qualname__}")
    if tag is None:
        raise TypeError(f"{where} is of type {cls.__module__}.{cls.__qualname__}, which bayes_loco.save "
                        f"cannot store: it stores the package's results ({SUPPORTED}), their enums and "
                        "the values described in bayes_loco.io")
    return tag


def format_1_tag(name: str) -> str | None:
    """The tag of the class a format-1 file names by ``"module:QualName"``, if it is registered.

    A class that moved since format 1 keeps its old name in :data:`MOVED`, so that
    format-1 files still load.
    """
    return LOCATIONS.get(name) or MOVED.get(name)
