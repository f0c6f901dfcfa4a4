"""Every cell scored (course_lib/every_cell.py): the cell tokens, the shared prefix against each prompt run
whole (values and gradients), the rewards from the rubric, and a step that makes the best cell more likely.
A tiny randomly initialised model with the embedded model's tokenizer and chat template: seconds, no download."""

import pytest
import torch

from course_lib import every_cell
from course_lib.models import resolve_model
from course_lib.profiles import get_profile
from tictactoe import first_user_message, system_prompt
from tictactoe.moves import answer_reward


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(resolve_model(get_profile("smoke")))


@pytest.fixture()
def tiny_model(tmp_path):
    from test_grpo import tiny_copy_of_the_embedded_model  # tests/ is on sys.path (no __init__.py)
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    return AutoModelForCausalLM.from_pretrained(tiny_copy_of_the_embedded_model(tmp_path / "tiny"))


def position(board_text: str, answer_format: str = "move") -> list[dict]:
    board = [None if ch == "." else ch for ch in board_text]
    return [
        {"role": "system", "content": system_prompt(answer_format)},
        {"role": "user", "content": first_user_message(board, model_starts=board.count("O") == board.count("X"))},
    ]


def test_each_cell_is_one_token_after_move(tokenizer):
    tokens = every_cell.cell_tokens(tokenizer)
    assert len(set(tokens)) == 9
    ids = every_cell.render(tokenizer, position("........."))
    for cell, token in enumerate(tokens):
        text = tokenizer.decode(ids) + str(cell)
        assert tokenizer(text, add_special_tokens=False)["input_ids"] == ids + [token]


def test_shared_prefix_gives_the_same_log_probs_and_gradients(tokenizer, tiny_model):
    """Catches: a cache whose rows do not all see the prefix, padding read as tokens, a gradient that stops
    at the shared keys and values (the prefix's weights would then get none)."""
    sequences = [every_cell.render(tokenizer, position(b)) for b in ("O........", "X...O....", "XO..O.X..")]
    sequences.append(sequences[0] + tokenizer("\nmore text", add_special_tokens=False)["input_ids"])
    cells = every_cell.cell_tokens(tokenizer)
    assert every_cell.common_prefix(sequences) > 100  # the system prompt at least
    results = []
    for share in (True, False):
        tiny_model.zero_grad()
        log_probs = every_cell.cell_log_probs(tiny_model, sequences, cells, share_prefix=share)
        (log_probs.exp() * torch.arange(10.0)).sum().backward()
        grads = [p.grad.clone() for p in tiny_model.parameters() if p.grad is not None]
        results.append((log_probs.detach(), grads))
    (shared, shared_grads), (whole, whole_grads) = results
    assert torch.allclose(shared, whole, atol=1e-5)
    assert len(shared_grads) == len(whole_grads)
    for a, b in zip(shared_grads, whole_grads):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)


def test_log_probs_cover_every_action(tokenizer, tiny_model):
    sequences = [every_cell.render(tokenizer, position("O........"))]
    log_probs = every_cell.cell_log_probs(tiny_model, sequences, every_cell.cell_tokens(tokenizer))
    assert log_probs.shape == (1, 10)
    assert torch.allclose(log_probs.exp().sum(), torch.tensor(1.0), atol=1e-4)


def test_action_rewards_are_the_rubrics():
    info = {"board": "OO.XX....", "kind": "win"}  # X wins at 5; O threatens 2
    rewards = every_cell.action_rewards(info)
    assert rewards[5] == pytest.approx(1.2)  # optimal, well formed
    assert rewards[0] == pytest.approx(0.1)  # taken: well formed, invalid
    assert rewards[2] == pytest.approx(0.7)  # blocks: a slower win, the outcome kept
    assert rewards[6] == pytest.approx(0.2)  # legal, but O wins at 2 next
    assert rewards[9] == pytest.approx(-0.1)  # no cell at all
    assert rewards[5] == answer_reward("<move>5</move>", info)


def test_expected_reward_is_the_probability_weighted_reward():
    log_probs = torch.log(torch.tensor([[0.5, 0.25, 0.25]]))
    assert float(every_cell.expected_reward(log_probs, torch.tensor([[1.0, 0.0, 2.0]]))) == pytest.approx(1.0)


def test_a_step_makes_the_best_cell_more_likely(tokenizer, tiny_model):
    """Catches: the loss's sign, rewards paired with the wrong cells."""
    sequences = [every_cell.render(tokenizer, position("OO.XX...."))]
    cells = every_cell.cell_tokens(tokenizer)
    rewards = torch.tensor([every_cell.action_rewards({"board": "OO.XX....", "kind": "win"})])
    optimizer = torch.optim.SGD(tiny_model.parameters(), lr=1.0)
    before = every_cell.cell_log_probs(tiny_model, sequences, cells).detach().exp()[0, 5]
    for _ in range(3):
        optimizer.zero_grad()
        (-every_cell.expected_reward(every_cell.cell_log_probs(tiny_model, sequences, cells), rewards)).backward()
        optimizer.step()
    after = every_cell.cell_log_probs(tiny_model, sequences, cells).detach().exp()[0, 5]
    assert after > before


def test_play_and_learn_plays_whole_games_and_logs_each_step(tokenizer, tiny_model):
    optimizer = torch.optim.AdamW(tiny_model.parameters(), lr=1e-3)
    log = every_cell.play_and_learn(tiny_model, tokenizer, optimizer, games=4, games_at_once=4, seed=3)
    assert log.rows and all(row["positions"] >= 1 for row in log.rows)
    assert log.rows[0]["positions"] == 4  # every game's first turn in one step
    assert {"score", "optimal", "score_block", "expected_reward"} <= set(log.rows[0])


def test_answer_log_probs_match_each_sequence_run_whole(tokenizer, tiny_model):
    """Catches: the shared prefix reaching into an answer (its logits would be missing), answer tokens read one
    position off."""
    prompt = every_cell.render(tokenizer, position("O........", "think"), answer_prefix="")
    answers = [
        tokenizer("<think>I take the centre.</think>\n<move>", add_special_tokens=False)["input_ids"],
        tokenizer("<think>I take a corner.</think>\n<move>", add_special_tokens=False)["input_ids"],
    ]
    sequences = [prompt + answer for answer in answers]
    cells = every_cell.cell_tokens(tokenizer)
    _, shared = every_cell.cell_log_probs(tiny_model, sequences, cells, [len(prompt)] * 2)
    with torch.no_grad():
        for sequence, answer, got in zip(sequences, answers, shared):
            logits = tiny_model(input_ids=torch.tensor([sequence])).logits[0].float().log_softmax(-1)
            expected = sum(logits[len(prompt) - 1 + i, token] for i, token in enumerate(answer))
            assert float(got) == pytest.approx(float(expected), abs=1e-4)


def test_play_and_learn_keeps_the_reasoning_in_the_think_format(tokenizer, tiny_model):
    optimizer = torch.optim.AdamW(tiny_model.parameters(), lr=1e-3)
    log = every_cell.play_and_learn(
        tiny_model,
        tokenizer,
        optimizer,
        games=2,
        games_at_once=2,
        seed=1,
        answer_format="think",
        max_reasoning_tokens=8,
    )
    assert log.rows[0]["positions"] == 2


def test_train_uses_the_objective_given_and_saves_a_loadable_checkpoint(tmp_path):
    """A run of notebook 09's shape: the learner's objective is the one trained (a wrong one that returns a
    constant has no gradient and fails), the held-out scores before and after, and a checkpoint that loads."""
    import json
    from dataclasses import replace

    from test_grpo import tiny_copy_of_the_embedded_model
    from transformers import AutoModelForCausalLM

    budget = replace(get_profile("smoke").every_cell, minutes=0.01, games_at_once=2, held_out=2, score_every=1)
    called = []

    def objective(log_probs, rewards):
        called.append(log_probs.shape)
        return every_cell.expected_reward(log_probs, rewards)

    model = tiny_copy_of_the_embedded_model(tmp_path / "outputs" / "tiny")
    final, steps, held = every_cell.train(str(model), tmp_path / "run", budget, objective=objective, report=None)
    assert called and called[0][1] == 10  # nine cells and "any other token"
    assert (
        held["step"].tolist() == list(range(len(steps) + 1)) and held["positions"].iloc[-1] == steps["positions"].sum()
    )
    assert {"steps.csv", "held_out.csv", "settings.json", "final"} <= {p.name for p in (tmp_path / "run").iterdir()}
    AutoModelForCausalLM.from_pretrained(final)
    assert json.loads((tmp_path / "run" / "settings.json").read_text())["model"] == "outputs/tiny"  # not this machine's

    with pytest.raises(RuntimeError, match="does not require grad"):
        every_cell.train(str(model), tmp_path / "flat", budget, objective=lambda lp, r: lp.new_tensor(0.5), report=None)


def test_the_cpu_profile_trains_as_the_recorded_run_did():
    """Catches: the cpu profile's every-cell settings drifting from the run RESULTS.md reports (held-out scoring,
    which does not change training, may differ)."""
    import json

    from course_lib.sweeps import EVERY_CELL_RUN

    recorded = json.loads((EVERY_CELL_RUN / "settings.json").read_text())
    budget = get_profile("cpu").every_cell
    for name in ("minutes", "games_at_once", "learning_rate", "lora_rank", "lora_layers", "held_out"):
        assert float(recorded[name]) == getattr(budget, name), name
    assert recorded["answer_format"] == get_profile("cpu").answer_format
