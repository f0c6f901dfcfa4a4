"""The rubric's reward functions with their names and weights: what the GRPO bridge hands TRL
(rollout_bridge.trl_reward_functions) and what the environment checker bounds rewards with.

verifiers 0.3.1 has no public accessor for them: this is the one place in the course that reads
the rubric's private `_get_reward_*` methods (a RubricGroup overrides them).
"""

from typing import Callable, NamedTuple

import verifiers as vf


class RewardFunction(NamedTuple):
    name: str
    func: Callable
    weight: float  # 0: a metric (logged, not rewarded)


def reward_functions(env: vf.Environment) -> list[RewardFunction]:
    """The rubric's functions with their names and weights, in the rubric's order."""
    rubric = env.rubric
    return [
        RewardFunction(name, func, weight)
        for name, func, weight in zip(
            rubric._get_reward_func_names(), rubric._get_reward_funcs(), rubric._get_reward_weights(), strict=True
        )
    ]
