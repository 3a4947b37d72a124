"""The PersonalLLM loader, study problem and stand-in; they live in :mod:`bayes_loco.datasets.personalllm`.

This module keeps ``import bayes_loco.personalllm`` and its names working.
"""

from .datasets.personalllm import (
    N_RESPONSES,
    REWARD_MODELS,
    PersonalLLMProblem,
    expected_columns,
    load_personalllm,
    personalllm_problem,
    score_tensor,
    write_standin,
)

__all__ = ["N_RESPONSES", "REWARD_MODELS", "PersonalLLMProblem", "expected_columns", "load_personalllm",
           "personalllm_problem", "score_tensor", "write_standin"]
