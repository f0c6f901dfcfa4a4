"""course_lib.fast_generation: the same tokens as stock transformers, stock `generate` when it is
switched off or the installed transformers is untested, and the only module using transformers internals."""

import asyncio
import contextlib
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import transformers
from transformers import AutoModelForCausalLM

from course_lib import fast_generation
from course_lib.fast_generation import TOP_K, TopKSampler
from course_lib.local_model import LocalModel, sample_batch
from course_lib.models import embedded_checkpoint

GREEDY = {"max_tokens": 16, "temperature": 1e-6, "top_p": 1.0}
COURSE_LIB = Path(__file__).resolve().parent.parent / "course_lib"


@contextlib.contextmanager
def switched(value: str):
    """COURSE_FAST_GENERATION set to `value`, with the fallback sentences not yet said."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(fast_generation.OFF_SWITCH, value)
        patch.setattr(fast_generation, "_said", set())
        yield patch


@pytest.fixture
def fast_on():
    with switched("1") as patch:
        reason = fast_generation.why_not()
        if reason is not None:  # an untested transformers: the fallback tests below still run
            pytest.skip(reason)
        yield patch


@pytest.fixture(scope="module")
def models():
    """The embedded 135M model twice, both in float32: on the fast path and on stock generate."""
    with switched("1"):
        if fast_generation.why_not() is not None:
            pytest.skip(fast_generation.why_not())
        fast = LocalModel(embedded_checkpoint(), dtype="float32")
    with switched("0"):
        stock = LocalModel(embedded_checkpoint(), dtype="float32")
    assert fast.fast and not stock.fast
    yield fast, stock
    fast.stop()
    stock.stop()


def game_prompts(tokenizer) -> list[list[int]]:
    from tictactoe import load_environment

    rows = load_environment(num_train_examples=0, num_eval_examples=2).eval_dataset
    texts = [tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=False) for row in rows]
    texts += ["The capital of France is", "One, two, three, four, five, six, seven,"]
    return [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]


def stock_generate(model, tokenizer, prompts: list[list[int]], max_new_tokens: int) -> list[list[int]]:
    """transformers' own greedy `generate` on a left-padded batch, cut after each sequence's EOS."""
    width, pad, eos = max(map(len, prompts)), tokenizer.pad_token_id, tokenizer.eos_token_id
    with torch.inference_mode():
        out = model.generate(
            input_ids=torch.tensor([[pad] * (width - len(ids)) + ids for ids in prompts]),
            attention_mask=torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in prompts]),
            do_sample=False,
            max_new_tokens=max_new_tokens,
            pad_token_id=pad,
            eos_token_id=eos,
        )
    return [ids[: ids.index(eos) + 1] if eos in ids else ids for ids in out[:, width:].tolist()]


def test_fast_path_and_stock_generate_pick_the_same_greedy_tokens_over_two_turns(models):
    """Catches: the grouped-query attention, the preallocated cache or its prefilled prefixes
    computing anything other than transformers' "sdpa" attention with its DynamicCache."""
    fast, stock = models
    tokenizer = fast.tokenizer
    assert fast.network.config._attn_implementation == fast_generation.GROUPED_QUERY_SDPA
    assert stock.network.config._attn_implementation == "sdpa"
    prompts = game_prompts(tokenizer)
    first = fast.generate_batch(prompts, GREEDY)
    expected = stock_generate(stock.network, tokenizer, prompts, GREEDY["max_tokens"])
    assert [completion for completion, _ in first] == expected
    assert stock.generate_batch(prompts, GREEDY) == first
    # The next turn of the first two games: both paths now reuse their prefix caches.
    reply = tokenizer("<|im_start|>user\nYour move.<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)
    second = [ids + completion + reply["input_ids"] for ids, (completion, _) in zip(prompts[:2], first)] + prompts[3:]
    assert all(fast.prefix_cache.lookup(ids) is not None for ids in second[:2])  # not only a no-cache run
    assert fast.generate_batch(second, GREEDY) == stock.generate_batch(second, GREEDY)


def test_bfloat16_generation_needs_a_native_bf16_cpu_and_the_fast_path(monkeypatch):
    """Catches: bfloat16 on a CPU without native bf16 (slower there), with torch's own attention
    kernel (3x slower in bfloat16), or against COURSE_CPU_BF16=0."""
    from course_lib import hardware
    from course_lib.local_model import generation_dtype

    monkeypatch.setattr(hardware, "cpu_has_native_bf16", lambda: True)
    monkeypatch.delenv(hardware.CPU_BF16_VARIABLE, raising=False)
    with switched("1"):
        assert generation_dtype() == ("float32" if fast_generation.why_not() else "bfloat16")
        monkeypatch.setenv(hardware.CPU_BF16_VARIABLE, "0")
        assert generation_dtype() == "float32"
        monkeypatch.delenv(hardware.CPU_BF16_VARIABLE)
        monkeypatch.setattr(hardware, "cpu_has_native_bf16", lambda: False)
        assert generation_dtype() == "float32"
    monkeypatch.setattr(hardware, "cpu_has_native_bf16", lambda: True)
    with switched("0"):
        assert generation_dtype() == "float32"


def test_the_off_switch_loads_stock_attention_and_never_calls_the_fast_path(capsys):
    """Catches: COURSE_FAST_GENERATION=0 ignored (a broken fast path could then not be switched
    off), or any fast-path function still called when it is off."""

    def forbidden(*args, **kwargs):
        raise AssertionError("the fast path ran although it is switched off")

    with switched("0") as patch:
        for name in ("register_grouped_query_sdpa", "preallocated_cache", "_sdpa_grouped_query", "TopKSampler"):
            patch.setattr(fast_generation, name, forbidden)
        from tictactoe import load_environment

        env = load_environment(num_train_examples=0, num_eval_examples=1, max_turns=1)
        with LocalModel(embedded_checkpoint()) as model:
            assert not model.fast and model.network.config._attn_implementation == "sdpa"
            results = asyncio.run(
                env.evaluate(
                    model.client, model.model, sampling_args={"max_tokens": 8}, num_examples=1, rollouts_per_example=2
                )
            )
            assert all(output.get("error") is None for output in results["outputs"])
            assert model.chat("Say hi", max_tokens=4)
    assert capsys.readouterr().out.count("COURSE_FAST_GENERATION=0: generating with stock transformers") == 1


def test_an_untested_transformers_version_falls_back_to_stock_generate_with_one_sentence(capsys):
    """Catches: the fast path used on a transformers it was never checked against (a changed
    internal would then give wrong tokens or crash instead of costing speed)."""
    with switched("1") as patch:
        patch.setattr(transformers, "__version__", "5.99.0")
        model = LocalModel(embedded_checkpoint())
        assert not model.fast and model.network.config._attn_implementation == "sdpa"
        assert not fast_generation.enabled()  # asked again: said once only
        [completion] = model.generate_batch([model.tokenizer("Hello", add_special_tokens=False)["input_ids"]], GREEDY)
        assert completion[0]
    out = capsys.readouterr().out
    assert out.count("tested with transformers 5.17, not 5.99.0") == 1, out


def test_the_fast_cache_keeps_the_layers_of_other_architectures(fast_on):
    """Catches: a hybrid model's convolution-state layers (LFM2, the GPU profiles' model family)
    replaced by the preallocated attention cache, which breaks its generation."""
    from transformers.models.lfm2.configuration_lfm2 import Lfm2Config

    config = Lfm2Config(
        vocab_size=300,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        pad_token_id=0,
        eos_token_id=1,
        layer_types=["conv", "full_attention", "conv", "full_attention"],
    )
    torch.manual_seed(0)
    stock = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").eval()
    attention = fast_generation.register_grouped_query_sdpa()
    fast = AutoModelForCausalLM.from_config(config, attn_implementation=attention).eval()
    fast.load_state_dict(stock.state_dict())
    tokenizer = type("Tokenizer", (), {"pad_token_id": 0, "eos_token_id": 1})()
    prompts = [[5, 6, 7, 8, 9], [10, 11, 12]]
    expected = stock_generate(stock, tokenizer, prompts, 6)
    greedy = {"max_tokens": 6, "temperature": 1e-6, "top_p": 1.0}
    completions = sample_batch(fast, tokenizer, prompts, greedy, make_cache=fast_generation.preallocated_cache)
    assert [completion for completion, _ in completions] == expected


def test_only_the_fast_path_module_touches_transformers_internals():
    """Catches: an import of transformers' cache or mask internals, or an attention registration,
    creeping back into the client, LocalModel or training code (an upgrade would then break them)."""
    internal = re.compile(r"cache_utils|masking_utils|AttentionInterface|AttentionMaskInterface|\.layers\s*=")
    offenders = [
        path.name
        for path in COURSE_LIB.rglob("*.py")
        if path.name != "fast_generation.py" and internal.search(path.read_text())
    ]
    assert offenders == []


def test_training_code_does_not_import_the_fast_path():
    """Catches: sft, grpo, train_grpo or the rollout bridge importing course_lib.fast_generation."""
    code = (
        "import sys, course_lib.sft, course_lib.grpo, course_lib.train_grpo, course_lib.rollout_bridge\n"
        "print('course_lib.fast_generation' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip().splitlines()[-1] == "False"


@pytest.mark.parametrize("temperature, top_p", [(0.7, 0.95), (1.0, 1.0), (0.3, 0.5)])
def test_the_sampler_draws_from_the_distribution_transformers_samples_from(temperature, top_p):
    """Catches: a top-p cut one token off, or taken before the temperature, or a wrong top-k, against
    transformers' own warpers (temperature, top-k 50, top-p), on flat rows and on one very peaked row."""
    from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    torch.manual_seed(0)
    scores = torch.randn(6, 2000) * torch.tensor([[0.5], [1.0], [2.0], [3.0], [4.0], [0.1]])
    scores[5, 7] = 30.0  # one token holds nearly all the mass
    warpers = [TemperatureLogitsWarper(temperature), TopKLogitsWarper(TOP_K)]
    if top_p < 1.0:  # transformers leaves top-p out at 1.0
        warpers.append(TopPLogitsWarper(top_p))
    expected = LogitsProcessorList(warpers)(None, scores.clone()).log_softmax(-1)

    sampler = TopKSampler(temperature, top_p)
    log_probs, tokens = sampler.candidates(scores)
    ours = torch.full_like(scores, -float("inf")).scatter_(1, tokens, log_probs)
    assert torch.equal(ours.isinf(), expected.isinf())
    assert torch.allclose(ours[~ours.isinf()], expected[~expected.isinf()], atol=1e-5)

    drawn = sampler(None, scores)  # one token per row: the rest -inf, the drawn token its log-probability
    assert ((~drawn.isinf()).sum(-1) == 1).all()
    token = drawn.argmax(-1, keepdim=True)
    assert torch.allclose(drawn.gather(1, token), expected.gather(1, token))


def test_the_bfloat16_attention_matches_torchs_kernel_with_padding():
    """Catches: a query head read against the wrong key/value head, a mask applied to the wrong axis,
    or a padding query (one that may see nothing) turning into NaN, against torch's own kernel in
    float32, at a decoding step and at a padded prefill."""
    from types import SimpleNamespace

    torch.manual_seed(0)
    module = SimpleNamespace(training=False)
    for length in (1, 5):  # one new token; a prompt's rest
        query = torch.randn(3, 9, length, 64)
        key, value = torch.randn(3, 3, 12, 64), torch.randn(3, 3, 12, 64)
        mask = torch.ones(3, 1, length, 12, dtype=torch.bool).tril(diagonal=12 - length)
        mask[1, :, :, :4] = False  # a left-padded row
        mask[2, :, 0, :] = False  # a padding query: it may look at nothing
        expected = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=mask, enable_gqa=True)
        out, _ = fast_generation._sdpa_grouped_query(module, query.bfloat16(), key.bfloat16(), value.bfloat16(), mask)
        assert out.dtype == torch.bfloat16 and out.isfinite().all()
        seen = mask.any(-1).transpose(1, 2)[..., None].expand(3, length, 9, 64)  # queries that see something
        assert torch.allclose(out.float()[seen], expected.transpose(1, 2)[seen], atol=0.05)
