"""The in-process batching client: many concurrent requests, one batch, each answer to its caller."""

import asyncio
import threading

import pytest
import verifiers as vf

from course_lib.local_model import LocalModel, LocalModelClient
from course_lib.models import embedded_checkpoint

SAMPLING = {"max_tokens": 16, "temperature": 1.0, "top_p": 1.0}


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(embedded_checkpoint())


def echo_number(tokenizer, calls):
    """A generate_batch that answers each prompt with the number it asks about, and logs its batches."""

    def generate_batch(prompts, sampling):
        calls.append((len(prompts), dict(sampling), threading.current_thread().name))
        answers = []
        for ids in prompts:
            number = tokenizer.decode(ids).rsplit("number ", 1)[1].split("<")[0].strip()
            answers.append(
                (tokenizer(f"You said {number}", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id], [])
            )
        return answers

    return generate_batch


def ask(client, number, **sampling):
    prompt = [vf.UserMessage(content=f"Repeat the number {number}")]
    return client.get_response(prompt, "local", sampling)


def run(coroutine, timeout=60):
    """Nothing may hang: every test finishes within `timeout` seconds or fails."""

    async def bounded():
        return await asyncio.wait_for(coroutine, timeout)

    return asyncio.run(bounded())


def test_concurrent_requests_share_batches_and_each_caller_gets_its_own_answer(tokenizer):
    """Catches: answers delivered to the wrong caller, or requests answered one at a time."""
    calls = []
    client = LocalModelClient(tokenizer, echo_number(tokenizer, calls), SAMPLING, max_batch_size=16)

    async def many():
        return await asyncio.gather(*(ask(client, n) for n in range(40)))

    responses = run(many())
    assert [r.message.content for r in responses] == [f"You said {n}" for n in range(40)]
    assert [size for size, _, _ in calls] == [16, 16, 8]  # 40 requests, batches of at most 16
    assert all(thread == threading.main_thread().name for _, _, thread in calls)  # torch's one thread


def test_every_batch_of_every_client_runs_on_one_thread(tokenizer):
    """Catches: batches spread over asyncio.to_thread's several threads, each with its own malloc
    arena, which kept the freed buffers of all of them (a 200-game evaluation peaked at 13-16 GB)."""
    calls = []
    clients = [LocalModelClient(tokenizer, echo_number(tokenizer, calls), SAMPLING, max_batch_size=4) for _ in range(2)]

    async def many():
        return await asyncio.gather(*(ask(clients[n % 2], n) for n in range(24)))

    for _ in range(3):  # separate event loops, as separate notebook cells have
        run(many())
    assert len(calls) >= 12 and len({thread for _, _, thread in calls}) == 1


def test_a_request_sampling_wins_over_the_defaults_and_splits_batches(tokenizer):
    calls = []
    client = LocalModelClient(tokenizer, echo_number(tokenizer, calls), SAMPLING)

    async def mixed():
        return await asyncio.gather(ask(client, 1), ask(client, 2, max_tokens=4, temperature=0.5), ask(client, 3))

    run(mixed())
    assert sorted((size, sampling["max_tokens"], sampling["temperature"]) for size, sampling, _ in calls) == [
        (1, 4, 0.5),
        (2, 16, 1.0),
    ]


def test_an_error_in_generation_reaches_every_waiting_caller_and_the_next_batch_still_runs(tokenizer):
    """Catches: a failed batch that leaves its callers waiting forever, or kills the worker."""
    calls = []
    good = echo_number(tokenizer, calls)
    failures = iter([True])

    def sometimes_broken(prompts, sampling):
        if next(failures, False):
            raise MemoryError("out of memory: lower max_batch_size")
        return good(prompts, sampling)

    client = LocalModelClient(tokenizer, sometimes_broken, SAMPLING)

    async def two_rounds():
        first = await asyncio.gather(*(ask(client, n) for n in range(3)), return_exceptions=True)
        second = await ask(client, 7)
        return first, second

    first, second = run(two_rounds())
    assert all(isinstance(error, vf.ModelError) and isinstance(error.__cause__, MemoryError) for error in first)
    assert second.message.content == "You said 7"


def test_a_turn_cut_at_max_tokens_is_closed_and_reported_as_truncated(tokenizer):
    client = LocalModelClient(
        tokenizer, lambda prompts, s: [([tokenizer.encode("a")[0]] * s["max_tokens"], []) for _ in prompts], SAMPLING
    )
    response = run(ask(client, 1))
    assert response.message.is_truncated and response.message.finish_reason == "length"
    assert client.closed_turns == 1


def test_the_embedded_model_plays_tictactoe_games_in_batches_and_samples():
    """Real model, real environment: several games at once go through one batch, and two rollouts
    of the same game can differ (sampling is on)."""
    from tictactoe import load_environment

    env = load_environment(num_train_examples=0, num_eval_examples=1, max_turns=1)
    with LocalModel(embedded_checkpoint()) as model:
        results = run(
            env.evaluate(
                model.client,
                model.model,
                sampling_args={"max_tokens": 12},
                num_examples=1,
                rollouts_per_example=6,
                max_concurrent=6,
            ),
            timeout=240,
        )
        assert max(model.client.batch_sizes) > 1
        answers = [o["completion"][0]["content"] for o in results["outputs"]]
        assert len(set(answers)) > 1, answers
        assert all(o.get("error") is None for o in results["outputs"])
        assert model.chat("Say hi", max_tokens=4)  # the one-request path the play widget uses
    assert model.network is None  # stopped: the weights are freed


def test_the_prefix_cache_changes_no_token_over_two_turns():
    """Catches: a wrong position, mask or cache slice when a batch reuses earlier KV caches (the
    system prompt other games share, and each game's previous turn), with prompts of different
    lengths padded between the cached part and the rest."""
    from course_lib.local_model import sample_batch
    from tictactoe import load_environment

    model = LocalModel(embedded_checkpoint(), dtype="float32")  # bfloat16 rounds differently with other batch shapes
    tokenizer = model.tokenizer
    rows = load_environment(num_train_examples=0, num_eval_examples=3).eval_dataset
    prompts = [
        tokenizer(
            tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=False),
            add_special_tokens=False,
        )["input_ids"]
        for row in rows
    ]
    greedy = {"max_tokens": 6, "temperature": 1e-6, "top_p": 1.0}
    plain = lambda batch: sample_batch(model.network, tokenizer, batch, greedy)  # noqa: E731
    first = model.generate_batch(prompts[:2], greedy)  # nothing cached yet
    assert first == plain(prompts[:2])
    reply = tokenizer("<|im_start|>user\nYour move.<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)[
        "input_ids"
    ]
    second_turns = [ids + completion + reply for ids, (completion, _) in zip(prompts[:2], first)]
    batch = [second_turns[0], prompts[2], second_turns[1] + reply]  # own turn, system prompt only, own turn
    cached = [model.prefix_cache.lookup(ids) for ids in batch]
    assert [kv[0][0].shape[1] if kv else 0 for kv in cached][0] >= len(prompts[0]) + len(first[0][0]) - 1
    assert 100 < cached[1][0][0].shape[1] < len(prompts[2])  # the system prompt another game computed
    assert sample_batch(model.network, tokenizer, batch, greedy, cached=cached) == plain(batch)


def test_tool_calls_the_model_writes_reach_the_tools_and_the_conversation_keeps_its_tokens(tokenizer):
    """The in-process client reads `<tool_call>` replies with the checkpoint's response template, as
    `transformers serve` does. Catches: tool calls left as text (the episode ends at the first turn),
    tool results dropped from the next prompt, or a conversation whose token ids do not extend."""
    import wiki_search as wiki

    question = wiki.load_questions()[0]
    env = wiki.load_environment(questions=[question])
    prompts = []

    def scripted_model(batch, sampling):
        prompts.extend(tokenizer.decode(ids) for ids in batch)
        replies = []
        for ids in batch:
            text = tokenizer.decode(ids)
            if "<tool_response>" not in text:  # first turn: search; then a malformed call; then the answer
                reply = (
                    '<tool_call>\n{"name": "search_pages", "arguments": {"query": "%s"}}\n</tool_call>'
                    % question["question"][:40]
                )
            elif text.count("<tool_response>") == 1 and "not JSON" not in text:
                reply = 'not JSON: <tool_call>\n{"name": "read_section", "arguments": {\n</tool_call>'
            else:
                reply = question["answer"]
            replies.append((tokenizer(reply, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id], []))
        return replies

    client = LocalModelClient(tokenizer, scripted_model, SAMPLING)
    results = run(
        env.evaluate(client=client, model="local", num_examples=1, rollouts_per_example=1, independent_scoring=True)
    )
    output = results["outputs"][0]
    assert output["error"] is None
    assert output["metrics"]["search_pages_calls"] == 1  # the call reached the tool
    assert "<tool_response>" in prompts[1]  # and its result the next prompt
    assert client.unreadable_tool_calls == 1  # the malformed call stayed text: the episode ended on it
    messages, ids = next(iter(client.conversations.values()))
    assert (
        ids[: len(tokenizer(prompts[1], add_special_tokens=False)["input_ids"])]
        == tokenizer(prompts[1], add_special_tokens=False)["input_ids"]
    )
    assert [m["role"] for m in messages][-3:] == ["assistant", "tool", "assistant"]
