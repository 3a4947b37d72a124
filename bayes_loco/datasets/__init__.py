"""Readers for the preference files users download, and generated files in their schemas.

:func:`read_arena` (Chatbot Arena battles), :func:`read_prism` (the PRISM
alignment dataset) and :func:`load_personalllm` (the PersonalLLM benchmark) read
local files; nothing here downloads. :func:`write_prism` and :func:`write_arena`
write GENERATED stand-ins in the PRISM and Arena schemas from a known low-rank Θ*,
and return that truth.
"""

from ._common import Dataset
from .arena import read_arena
from .generate import GeneratedArena, GeneratedPrism, write_arena, write_prism
from .personalllm import (
    N_RESPONSES,
    REWARD_MODELS,
    PersonalLLMProblem,
    expected_columns,
    load_personalllm,
    personalllm_problem,
    score_tensor,
    write_standin,
)
from .prism import read_prism

__all__ = [
    "N_RESPONSES",
    "REWARD_MODELS",
    "Dataset",
    "GeneratedArena",
    "GeneratedPrism",
    "PersonalLLMProblem",
    "expected_columns",
    "load_personalllm",
    "personalllm_problem",
    "read_arena",
    "read_prism",
    "score_tensor",
    "write_arena",
    "write_prism",
    "write_standin",
]
