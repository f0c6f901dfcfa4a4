"""Check a verifiers environment before training on it, in the spirit of gymnasium's `check_env`.

    from course_lib.check_environment import check_environment
    print(check_environment(lambda: load_environment(seed=0), replies=profile.env.check_replies))

A model in training writes anything: empty replies, a megabyte of newlines, `<move>` opened a
thousand times and never closed, tool calls to tools that do not exist. `check_environment`
plays whole episodes in this process (no model, no server) with a fuzzing player that writes such
replies, mixed with plausible ones (the row's answer inside the tags the prompt mentions, small
numbers), and reports:

- crashes: rollouts that end with an error, or an exception out of the environment;
- rewards that are NaN or outside what the rubric's weights allow (each function in [0, 1]);
- the slowest group of episodes to play and to score (no reply may stall the environment);
- state changed by a reply sent after the episode ended (a game must not accept moves after it is over);
- determinism: the same replies must get the same rewards, and a loader called twice the same rows;
- groups whose rewards never vary (GRPO learns nothing from them) and whether any reward varies at all.
"""

import asyncio
import json
import math
import random
import re
import time
from dataclasses import dataclass, field

import verifiers as vf

from course_lib.offline import OfflineClient, run_coroutine
from course_lib.rewards import reward_functions

SIZES = (0, 1, 10, 100, 1_000, 10_000, 100_000, 1_000_000)
SIZE_WEIGHTS = (4, 4, 8, 8, 4, 2, 1, 0.5)  # about one reply in 60 is a megabyte long


def filler(rng: random.Random, size: int) -> str:
    """`size` characters of one kind: letters, whitespace, digits, markup or any Unicode."""
    kind = rng.choice(["a", " \n\t", "0123456789", "<>/{}[]\"'\\", "".join(map(chr, range(1, 0x2FF)))])
    return "".join(rng.choices(kind, k=size)) if size <= 1_000 else rng.choice(kind) * size


def fuzz_text(rng: random.Random, tags: list[str], answer: str) -> str:
    """One reply: plausible, broken or huge, built around the tags the prompt mentions."""
    tag = rng.choice(tags)
    size = rng.choices(SIZES, SIZE_WEIGHTS)[0]
    number = rng.choice(["0", "4", "8", "9", "-1", "+4", "04", "4.0", "1e3", "NaN", "9" * rng.choice([50, 5_000])])
    return rng.choice(
        [
            lambda: filler(rng, size),
            lambda: answer,
            lambda: f"<{tag}>{answer}</{tag}>",
            lambda: f"<{tag}>{number}</{tag}>",
            lambda: f"<think>{filler(rng, size)}</think>\n<{tag}>{number}</{tag}>",
            lambda: f"<{tag}>" + filler(rng, size),  # unclosed
            lambda: f"<{tag}>" * max(size // 10, 1),  # repeated, unclosed
            lambda: f"<{tag}>{number}</{tag}>" * max(size // 20, 1),  # repeated
            lambda: f"</{tag}>{answer}<{tag}>",  # inside out
        ]
    )()


def fuzz_call(rng: random.Random, tools: dict[str, list[str]], text: str, call_id: str) -> vf.ToolCall:
    """A tool call, right or wrong: an existing tool or not, its arguments (each `text`), one
    missing, one extra, or arguments that are not a JSON object."""
    name = rng.choice([*tools, "no_such_tool", ""])
    arguments = {parameter: text for parameter in tools.get(name, [])}
    return vf.ToolCall(
        id=call_id,
        name=name,
        arguments=rng.choice(
            [
                json.dumps(arguments),
                json.dumps(arguments),
                json.dumps({**arguments, "extra": 1}),
                json.dumps(dict(list(arguments.items())[1:])),
                "[]",
                "not json",
                "{" + text[:100],
            ]
        ),
    )


class FuzzClient(OfflineClient):
    """A player that answers every turn with `fuzz_text`, or with tool calls when there are tools."""

    def __init__(self, rng: random.Random, tags: list[str], tools: dict[str, list[str]]):
        super().__init__()
        self.rng, self.tags, self.tools, self.replies = rng, tags, tools, 0

    def respond(self, prompt, state=None, **kwargs):
        self.replies += 1
        text = fuzz_text(self.rng, self.tags, str((state or {}).get("answer") or ""))
        if not self.tools or self.rng.random() < 0.3:
            return text
        calls = [
            fuzz_call(self.rng, self.tools, text, f"call_{self.replies}_{i}") for i in range(self.rng.choice([1, 2, 5]))
        ]
        return vf.ResponseMessage(
            content=self.rng.choice([None, "", text]), tool_calls=calls, finish_reason="tool_calls", is_truncated=False
        )


@dataclass
class CheckReport:
    replies: int = 0
    episodes: int = 0
    groups: int = 0
    crashes: list[str] = field(default_factory=list)
    bad_rewards: list[str] = field(default_factory=list)
    changed_after_end: list[str] = field(default_factory=list)
    nondeterministic: list[str] = field(default_factory=list)
    constant_groups: int = 0
    rewards_seen: set = field(default_factory=set)
    slowest_scoring_s: float = 0.0
    slowest_play_s: float = 0.0
    seconds: float = 0.0

    @property
    def problems(self) -> list[str]:
        found = self.crashes + self.bad_rewards + self.changed_after_end + self.nondeterministic
        return found + (["every episode got the same reward"] if len(self.rewards_seen) < 2 else [])

    def __str__(self) -> str:
        rows = [
            ("replies tried", self.replies),
            ("episodes (groups)", f"{self.episodes} ({self.groups})"),
            ("crashes", len(self.crashes)),
            ("rewards NaN or out of range", len(self.bad_rewards)),
            ("state changed after the end", len(self.changed_after_end)),
            ("not deterministic", len(self.nondeterministic)),
            ("groups with one reward for all", f"{self.constant_groups} of {self.groups}"),
            ("distinct rewards", len(self.rewards_seen)),
            ("slowest group, played", f"{self.slowest_play_s:.3f} s"),
            ("slowest group, scored", f"{self.slowest_scoring_s:.3f} s"),
            ("checked in", f"{self.seconds:.1f} s"),
        ]
        lines = [f"{name:<32}{value}" for name, value in rows]
        problems = list(dict.fromkeys(problem[:300] for problem in self.problems))
        return "\n".join(lines + [f"  - {problem}" for problem in problems[:10]])


def reward_range(env: vf.Environment) -> tuple[float, float]:
    """The lowest and highest total reward if each reward function returns a value in [0, 1]."""
    weights = [reward.weight for reward in reward_functions(env)]
    return sum(min(w, 0) for w in weights), sum(max(w, 0) for w in weights)


def snapshot(state: vf.State) -> str:
    return repr({key: value for key, value in state.items() if key not in ("client", "timing", "trajectory")})


async def play_group(env, row, seeds, tags, tools, report: CheckReport) -> list[float]:
    """One group of episodes on one row, scored together; returns their rewards."""
    clients = [FuzzClient(random.Random(seed), tags, tools) for seed in seeds]
    start = time.perf_counter()
    states = await asyncio.gather(
        *(env.rollout(dict(row), client, "fuzz", {}) for client in clients), return_exceptions=True
    )
    report.slowest_play_s = max(report.slowest_play_s, time.perf_counter() - start)
    report.replies += sum(client.replies for client in clients)
    crashed = [s for s in states if isinstance(s, BaseException)]
    report.crashes += [f"row {row['example_id']}: {error!r}" for error in crashed]
    states = [s for s in states if not isinstance(s, BaseException)]
    report.crashes += [f"row {row['example_id']}: {s['error']!r}" for s in states if s.get("error")]
    start = time.perf_counter()
    try:
        await env.rubric.score_group(states)
    except Exception as error:
        report.crashes.append(f"row {row['example_id']}: scoring raised {error!r}")
        return []
    report.slowest_scoring_s = max(report.slowest_scoring_s, time.perf_counter() - start)
    low, high = reward_range(env)
    rewards = [s["reward"] for s in states]
    report.bad_rewards += [
        f"row {row['example_id']}: reward {r!r} outside [{low}, {high}]"
        for r in rewards
        if not (isinstance(r, (int, float)) and math.isfinite(r) and low - 1e-9 <= r <= high + 1e-9)
    ]
    for state in states:
        await after_the_end(env, state, tags, tools, report)
    return rewards


async def after_the_end(
    env, state: vf.State, tags: list[str], tools: dict[str, list[str]], report: CheckReport
) -> None:
    """Send one more reply (a tool call in a tool env) to a finished episode: nothing may change."""
    if isinstance(env, vf.SingleTurnEnv) or not state.get("is_completed"):
        return
    calls = [vf.ToolCall(id=f"late_{i}", name=name, arguments="{}") for i, name in enumerate(tools)] or None
    late = vf.AssistantMessage(content=f"<{tags[0]}>4</{tags[0]}>", tool_calls=calls)
    before = snapshot(state)
    try:
        await env.env_response([*state["prompt"], *(state["completion"] or []), late], state)
    except Exception:
        pass  # refusing a reply after the end is fine; changing the state is not
    if snapshot(state) != before:
        report.changed_after_end.append(f"row {state['example_id']}: a reply after the end changed the state")


def check_environment(env, replies: int, seed: int = 0, group_size: int = 4) -> CheckReport:
    """Play fuzzed episodes until `replies` replies were sent; `env` is an environment, or a
    function without arguments that returns one (then its rows are checked for determinism too)."""
    started, report = time.perf_counter(), CheckReport()
    make = env if callable(env) and not isinstance(env, vf.Environment) else None
    env = make() if make else env
    rows = env.get_eval_dataset().to_list()
    if make and make().get_eval_dataset().to_list() != rows:
        report.nondeterministic.append("loading the environment twice gave different rows")
    prompt_text = json.dumps(rows[0]["prompt"], default=str)
    tags = sorted(set(re.findall(r"</?([A-Za-z_][\w-]{0,30})>", prompt_text))) or ["answer"]
    tools = {tool.name: list((tool.parameters or {}).get("properties", {})) for tool in env.tool_defs or []}

    async def run() -> None:
        first_rewards = []
        while report.replies < replies:
            row = rows[report.groups % len(rows)]
            seeds = [f"{seed}:{report.groups}:{i}" for i in range(group_size)]
            rewards = await play_group(env, row, seeds, tags, tools, report)
            report.groups, report.episodes = report.groups + 1, report.episodes + len(rewards)
            report.constant_groups += len(set(rewards)) <= 1
            report.rewards_seen.update(rewards)
            if report.groups <= 3:
                first_rewards.append((row, seeds, rewards))
        for row, seeds, rewards in first_rewards:  # the same replies again: the same rewards
            again = await play_group(env, row, seeds, tags, tools, CheckReport())
            if repr(again) != repr(rewards):  # repr: NaN equals NaN
                report.nondeterministic.append(f"row {row['example_id']}: rewards {rewards}, then {again}")

    run_coroutine(run())  # also inside Jupyter, where an event loop is already running
    report.seconds = time.perf_counter() - started
    return report


if __name__ == "__main__":  # the full check of every course environment: python -m course_lib.check_environment
    import double_check
    import reverse_text
    import tictactoe
    import wiki_search
    from course_lib.profiles import PROFILES
    from wiki_search import session as wiki_session

    replies = PROFILES["full"].env.check_replies  # the GPU profiles' check, on any machine
    for module in (reverse_text, double_check, tictactoe, wiki_search, wiki_session):
        print(f"\n{module.__name__}\n{check_environment(module.load_environment, replies=replies)}", flush=True)
