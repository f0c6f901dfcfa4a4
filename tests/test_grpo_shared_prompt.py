"""A group's prompt run once (`grpo.shared_prompt_log_probs`) gives the log-probabilities, entropies and
gradients that TRL's own path gives when every episode runs its prompt: checked on a tiny random Llama,
with left-padded prompts and right-padded completions as TRL builds them."""

import torch
from transformers import LlamaConfig, LlamaForCausalLM
from trl.trainer.utils import add_fused_lm_head

from course_lib.grpo import rows_by_prompt, shared_prompt_log_probs

TINY = dict(
    vocab_size=97,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
)


def tiny_model():
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**TINY))
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    return model


def trl_path(model, input_ids, attention_mask, logits_to_keep):
    """What TRL 1.16's _get_per_token_logps_and_entropies computes for one micro-batch."""
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    labels[:, :-logits_to_keep] = -100
    out = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels, fused_lm_head=True)
    return out.log_probs[:, -logits_to_keep:], out.entropy[:, -logits_to_keep:]


def test_a_shared_prompt_gives_trls_log_probs_entropies_and_gradients():
    model = tiny_model()
    prompt = torch.tensor([5, 17, 3, 44, 9, 12])
    pad = 2  # left padding, as when another group of the step has a longer prompt
    completions = torch.tensor([[7, 8, 9, 1, 0], [7, 30, 0, 0, 0], [60, 61, 62, 63, 64]])
    completion_mask = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1]])
    rows = len(completions)
    prompt_ids = torch.cat([torch.zeros(pad, dtype=torch.long), prompt]).expand(rows, -1)
    prompt_mask = torch.cat([torch.zeros(pad, dtype=torch.long), torch.ones(len(prompt), dtype=torch.long)])
    input_ids = torch.cat([prompt_ids, completions], dim=1)
    attention_mask = torch.cat([prompt_mask.expand(rows, -1), completion_mask], dim=1)

    expected, expected_entropy = trl_path(model, input_ids, attention_mask, completions.size(1))
    (expected * completion_mask).sum().backward()
    expected_grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()

    out = shared_prompt_log_probs(model, prompt, completions, completion_mask)
    (out.log_probs * completion_mask).sum().backward()
    mask = completion_mask.bool()
    assert torch.allclose(out.log_probs[mask], expected[mask], atol=1e-5)
    assert torch.allclose(out.entropy[mask], expected_entropy[mask], atol=1e-5)
    for name, parameter in model.named_parameters():
        assert torch.allclose(parameter.grad, expected_grads[name], atol=1e-5), name


def test_rows_are_grouped_by_prompt_and_padding():
    ids = torch.tensor([[0, 1, 2], [3, 4, 5], [0, 1, 2], [0, 1, 2]])
    mask = torch.tensor([[0, 1, 1], [1, 1, 1], [0, 1, 1], [1, 1, 1]])
    assert rows_by_prompt(ids, mask) == [[0, 2], [1], [3]]


def tiny_lfm2():
    """LFM2's layout at the same tiny size: a convolution layer (its cache keeps no keys) and an attention layer."""
    from transformers import Lfm2Config, Lfm2ForCausalLM

    torch.manual_seed(0)
    return Lfm2ForCausalLM(Lfm2Config(**TINY, layer_types=["conv", "full_attention"]))


def test_a_prefix_is_shared_only_where_the_cache_holds_it():
    """Catches: the shared-prompt path taken under gradient checkpointing (transformers then drops the cache,
    and `layer.keys` fails: the GPU path) or on LFM2, whose convolution layers keep no keys."""
    from peft import LoraConfig, get_peft_model

    from course_lib.training import can_share_prefix

    llama = tiny_model()
    assert can_share_prefix(llama)
    assert can_share_prefix(get_peft_model(tiny_model(), LoraConfig(r=2, target_modules="all-linear")))
    llama.gradient_checkpointing_enable()
    assert not can_share_prefix(llama)
    assert not can_share_prefix(tiny_lfm2())


def test_the_every_cell_loss_runs_unshared_where_the_prefix_cannot_be_shared():
    """Catches: cell_log_probs failing under gradient checkpointing or on LFM2 instead of running each row whole."""
    from course_lib.every_cell import cell_log_probs

    sequences = [[5, 17, 3, 44, 9, 12, 8], [5, 17, 3, 44, 9, 30, 31, 8]]
    for model in (tiny_lfm2(), tiny_model()):
        model.train()
        model.gradient_checkpointing_enable()
        out = cell_log_probs(model, sequences, cells=[10, 11, 12])
        out.exp().sum().backward()
        assert out.shape == (2, 4)
