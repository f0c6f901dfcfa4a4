"""The env -> TRL bridge: token bookkeeping, masks and rewards, with a scripted 'model'."""

import asyncio
import threading
from types import SimpleNamespace

import pytest
import verifiers as vf
from datasets import Dataset

from course_lib import rollout_bridge as bridge
from course_lib.local_model import LocalModelClient
from course_lib.models import embedded_checkpoint
from course_lib.offline import on_main_thread, run_coroutine


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(embedded_checkpoint())


class AskTwiceEnv(vf.MultiTurnEnv):
    """Two model turns with an environment reply between them."""

    async def env_response(self, messages, state, **kwargs):
        return [vf.UserMessage(content="Are you sure? Answer again.")]


def says_seven(completion, **kwargs):
    return float("7" in (completion[-1]["content"] or ""))


@pytest.fixture
def env():
    rows = [
        {
            "prompt": [
                {"role": "system", "content": "Answer with a number."},
                {"role": "user", "content": f"What is {i} + 3?"},
            ],
            "answer": str(i + 3),
        }
        for i in range(3)
    ]
    return AskTwiceEnv(
        dataset=Dataset.from_list(rows), max_turns=2, rubric=vf.Rubric(funcs=[says_seven], weights=[0.5])
    )


def scripted(tokenizer, answers, finish=True):
    """A generate_batch that answers each request with the next scripted text."""
    queue = list(answers)

    def generate_batch(prompts, sampling):
        results = []
        for _ in prompts:
            ids = tokenizer(queue.pop(0), add_special_tokens=False)["input_ids"][: sampling["max_tokens"]]
            ids = ids + [tokenizer.eos_token_id] if finish else ids
            results.append((ids, [-0.5] * len(ids)))
        return results

    return generate_batch


def play(env, tokenizer, generate_batch, rows, max_tokens=32):
    client = LocalModelClient(tokenizer, generate_batch, {"max_tokens": max_tokens, "temperature": 1.0, "top_p": 1.0})
    return client, run_coroutine(bridge.play_episodes(env, rows, client))


def test_model_tokens_are_exactly_what_the_environment_saw(env, tokenizer):
    rows = env.get_dataset().to_list()[:1]
    _, (state,) = play(env, tokenizer, scripted(tokenizer, ["It is 5.", "It is 7."]), rows)
    tokens = bridge.episode_tokens(state)
    assert len(tokens["completion_ids"]) == len(tokens["env_mask"]) == len(tokens["logprobs"])
    # Split the completion into runs of model tokens: one per assistant turn.
    turns, current = [], []
    for token, is_model in zip(tokens["completion_ids"], tokens["env_mask"]):
        if is_model:
            current.append(token)
        elif current:
            turns.append(current)
            current = []
    turns.append(current)
    seen = [m["content"] for m in state["completion"] if m["role"] == "assistant"]
    assert [tokenizer.decode(t, skip_special_tokens=True) for t in turns] == seen == ["It is 5.", "It is 7."]
    assert all(t[-1] == tokenizer.eos_token_id for t in turns)  # each turn ends on the model's EOS


def test_environment_tokens_are_masked_and_the_sequence_matches_the_chat_template(env, tokenizer):
    rows = env.get_dataset().to_list()[:1]
    _, (state,) = play(env, tokenizer, scripted(tokenizer, ["It is 5.", "It is 7."]), rows)
    tokens = bridge.episode_tokens(state)
    env_text = tokenizer.decode([t for t, m in zip(tokens["completion_ids"], tokens["env_mask"]) if not m])
    assert "Are you sure? Answer again." in env_text
    assert "It is" not in env_text  # no model token is excluded from the loss
    conversation = [{"role": m["role"], "content": m["content"]} for m in state["prompt"] + state["completion"]]
    rendered = tokenizer.apply_chat_template(conversation, tokenize=False)
    assert rendered.startswith(tokenizer.decode(tokens["prompt_ids"] + tokens["completion_ids"]))
    assert all(lp == 0.0 for lp, m in zip(tokens["logprobs"], tokens["env_mask"]) if not m)


def test_a_turn_cut_at_the_token_limit_is_closed_by_an_unmasked_eos(env, tokenizer):
    rows = env.get_dataset().to_list()[:1]
    client, (state,) = play(
        env, tokenizer, scripted(tokenizer, ["a b c d e f g", "7"], finish=False), rows, max_tokens=3
    )
    tokens = bridge.episode_tokens(state)
    assert client.closed_turns == 2
    assert tokens["completion_ids"][-1] == tokenizer.eos_token_id and tokens["env_mask"][-1] == 0


def test_rewards_are_the_rubric_values_with_the_rubric_weights(env, tokenizer):
    functions, weights = bridge.trl_reward_functions(env)
    assert [f.__name__ for f in functions] == ["says_seven", "num_turns"] and weights == [0.5, 0.0]

    def answer_by_question(prompts, sampling):  # "7" only to the first question
        texts = ["7" if "What is 0 + 3?" in tokenizer.decode(ids) else "2" for ids in prompts]
        return scripted(tokenizer, texts)(prompts, sampling)

    dataset = env.get_dataset()
    rollout_func = bridge.make_rollout_func(env, dataset, tokenizer, lambda trainer: answer_by_question, 32)
    trainer = SimpleNamespace(args=SimpleNamespace(temperature=1.0, top_p=1.0))  # what rollout_func reads
    output = rollout_func(bridge.trl_prompt_dataset(dataset)["prompt"][:2], trainer=trainer)
    assert output["says_seven"] == [1.0, 0.0]  # rows keep their order and their own rewards
    assert functions[0](completions=None, **output) == [1.0, 0.0]
    assert output["num_turns"] == [2, 2]


def test_prompts_map_back_to_their_rows_in_order(env):
    prompts = bridge.trl_prompt_dataset(env.get_dataset())["prompt"]
    assert len(prompts) == 3 and len(set(prompts)) == 3


def test_a_failing_model_fails_loudly(env, tokenizer):
    def broken(prompts, sampling):
        raise MemoryError("out of memory: lower per_device_train_batch_size")

    with pytest.raises(RuntimeError, match="episode failed"):
        play(env, tokenizer, broken, env.get_dataset().to_list()[:1])


def test_every_step_runs_on_one_event_loop_and_a_nested_call_is_told_to_await():
    """Catches: a new thread and event loop per call (the old way), or a nested call that hangs."""

    async def loop_id():
        return id(asyncio.get_running_loop())

    assert run_coroutine(loop_id()) == run_coroutine(loop_id())

    async def nested():
        return run_coroutine(loop_id())

    with pytest.raises(RuntimeError, match="await the coroutine instead"):
        run_coroutine(nested())


def test_torch_work_runs_on_the_main_thread_while_it_waits_and_elsewhere_on_one_thread():
    """Catches: a batch generated on a second thread while the main thread trains (libgomp then throttles
    both: results/JOURNAL.md, "Why, and one thread for torch"), an error lost on the way, or a wait that hangs."""

    def thread_name():
        return threading.current_thread().name

    async def work():
        return await asyncio.gather(*(on_main_thread(thread_name) for _ in range(3)))

    assert run_coroutine(work()) == ["MainThread"] * 3

    async def failing():
        return await on_main_thread(int, "not a number")

    with pytest.raises(ValueError):
        run_coroutine(failing())

    from_another_thread = []
    waiter = threading.Thread(target=lambda: from_another_thread.extend(run_coroutine(work())))
    waiter.start()
    waiter.join(timeout=30)
    assert len(set(from_another_thread)) == 1 and from_another_thread[0] not in ("MainThread", waiter.name)
