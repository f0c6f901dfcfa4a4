"""Notebook 11's tic-tac-toe through TRL's `environment_factory` (course_lib/environment_factory.py).

The environment class is the notebook's own cell (tagged "tool-env"), run here as the notebook runs
it, so there is one copy. Two things are checked: the class scores games exactly like the classic
environment, and TRL's real loop (parse the model's tool call, call `move`, append the result, mask
it, score with `get_reward`) works with the embedded model's chat template, on scripted model text.
"""

import json
import random
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from course_lib import environment_factory as ef
from course_lib.grpo import full_game_environment
from course_lib.models import resolve_model
from course_lib.offline import OfflineClient, run_coroutine
from course_lib.profiles import PROFILES
from tictactoe import METRICS, MODEL
from tictactoe.game import expert_move

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "11_next_steps.ipynb"
SMOKE = PROFILES["smoke"]


@pytest.fixture(scope="module")
def tools_class():
    [cell] = [c for c in json.loads(NOTEBOOK.read_text())["cells"] if "tool-env" in c["metadata"].get("tags", [])]
    namespace = {"__name__": "notebook11"}
    exec(compile("".join(cell["source"]), "<11 cell tool-env>", "exec"), namespace)
    return namespace["TicTacToeTools"]


def play_both(classic, tools_class, row, first_cells: list, seed: int):
    """The same answers to both environments: `first_cells` (legal or not), then the expert's moves."""
    tools = tools_class()
    tools.reset(**row["info"])

    async def play():
        state = await classic.setup_state(await classic.init_state(row, client=OfflineClient(), model="scripted"))
        messages, rng, cells = list(row["prompt"]), random.Random(seed), list(first_cells)
        while tools.state["winner"] is None and tools.state["model_turns"] < classic.max_turns:
            cell = cells.pop(0) if cells else expert_move(tools.state["board"], MODEL, rng)[0]
            tools.move(cell)
            messages.append({"role": "assistant", "content": f"<move>{cell}</move>"})
            messages += [m.model_dump() for m in await classic.env_response(messages, state)]
        await classic.rubric.score_rollout(state)
        return state

    return tools, run_coroutine(play())


def test_the_tool_class_scores_games_exactly_like_the_classic_environment(tools_class):
    """Catches: rules, opponent or rewards of the tool version drifting from tictactoe's (another
    opponent seed, a missed draw, the invalid-move penalty or the turn cap counted differently)."""
    classic = full_game_environment(SMOKE.with_settings(**{"grpo.max_steps": 12, "grpo.prompts_per_step": 2}))
    rows = classic.get_dataset()
    outcomes = set()
    for i, first_cells in enumerate([[], [9], [9, 9, 9, 9, 9, 9], [0, 0], [4], [8, -1], [], [2]] * 3):
        row = rows[i % len(rows)]
        tools, state = play_both(classic, tools_class, row, first_cells, seed=i)
        assert tools.state["board"] == state["board"], (i, first_cells)
        for key in ("winner", "model_turns", "well_formed_turns", "invalid_moves"):
            assert tools.state[key] == state[key], (i, key)
        assert abs(tools.get_reward() - state["reward"]) < 1e-9
        outcomes.add(state["winner"])
    assert None in outcomes and len(outcomes) >= 3  # the turn cap and at least two finished results


def test_a_move_after_the_game_is_over_is_a_tool_error(tools_class):
    tools = tools_class()
    tools.reset(seed=1, board="XX.OO....", random_move_prob=0.0, model_starts=True)
    assert "You win!" in tools.move(2)
    with pytest.raises(ValueError, match="game is over"):
        tools.move(5)
    assert tools.get_reward() == pytest.approx(1.2)


def test_trl_runs_a_scripted_tool_call_through_move_masks_the_result_and_rewards_it(tools_class, tmp_path, monkeypatch):
    """One real GRPO step through `environment_factory` on the embedded model, its generation replaced
    by scripted text: game 0 calls move, game 1 answers in plain text. Catches: a chat template TRL
    refuses, a call TRL cannot parse back, the tool result trained on, or the reward not read from
    the environment."""
    from datasets import Dataset

    row = full_game_environment(SMOKE).get_dataset()[0]
    cell = row["info"]["board"].index(".")
    columns = {key: row["info"][key] for key in ("seed", "board", "random_move_prob", "model_starts")}
    dataset = Dataset.from_list([{"prompt": row["prompt"], **columns}])
    tokenizer = AutoTokenizer.from_pretrained(resolve_model(SMOKE))
    ids = {
        "call": f'<tool_call>\n{{"name": "move", "arguments": {{"cell": {cell}}}}}\n</tool_call><|im_end|>',
        "text": "I will think about it.<|im_end|>",
        "after": "Done.<|im_end|>",
    }
    ids = {name: tokenizer(text, add_special_tokens=False)["input_ids"] for name, text in ids.items()}
    trainer = ef.build_factory_trainer(
        SMOKE, tools_class, dataset, resolve_model(SMOKE), tmp_path, METRICS, max_steps=1, save_strategy="no",
        max_completion_length=256, max_tool_calling_iterations=6, report_to="none",
    )  # fmt: skip
    turns = []

    def scripted(prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        turns.append(len(prompt_ids))
        return ([ids["call"], ids["text"]] if len(turns) == 1 else [ids["after"]] * len(prompt_ids)), None

    monkeypatch.setattr(trainer, "_generate_single_turn", scripted)
    seen = ef.record_last_batch(trainer)
    trainer.train()

    assert turns == [2, 1]  # both games, then only the one that called the tool
    completion, mask = seen["completion_ids"][0], seen["mask"][0]
    assert completion[: len(ids["call"])] == ids["call"] and completion[-len(ids["after"]) :] == ids["after"]
    assert mask == [1] * len(ids["call"]) + [0] * (len(mask) - len(ids["call"]) - len(ids["after"])) + [1] * len(
        ids["after"]
    )
    shown = ef.masked_text(tokenizer, completion, mask)
    assert f"[[\n<|im_start|>user\n<tool_response>\nYou played {cell}. O played" in shown
    assert seen["mask"][1] == [1] * len(ids["text"])
    [log] = [entry for entry in trainer.state.log_history if "reward" in entry]
    # Game 0: one legal, well-formed move, game unfinished: 0.2; game 1: no call, nothing: 0.
    assert log["rewards/TicTacToeTools/mean"] == pytest.approx(0.1)
    assert log["rewards/model_turns/mean"] == pytest.approx(0.5)
    assert log["tools/call_frequency"] == pytest.approx(0.5) and log["tools/failure_frequency"] == 0
