"""A group's shared prompt forwarded once in training: same gradients as one pass per episode, how much faster?

    python dev/measure_prefix_sharing.py          # full fine-tuning, float32; about 2 minutes on 2 cores
    python dev/measure_prefix_sharing.py --lora   # LoRA rank 8 on every linear layer (notebook 09's GRPO)

The 8 games of a GRPO group start from the same prompt (about 245 tokens in notebook 09), and training runs each
game's whole sequence, prompt included. Here the prompt (but its last token) is forwarded once; its keys and
values become leaf tensors that every episode attends to through a cache; after the episodes' backward passes,
the leaves' summed gradients go back through the prompt's graph in one backward. Same math: the script checks
the parameters' gradients against one full pass per episode (random tokens of notebook 09's lengths; episodes
of 180-650 tokens, the 649-token longest of a measured step included). Prints times and the relative difference.
"""

import argparse
import sys
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, DynamicCache

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from course_lib.models import embedded_checkpoint  # noqa: E402
from course_lib.training import lora_config  # noqa: E402

PROMPT_TOKENS = 245
EPISODE_TOKENS = (180, 300, 260, 420, 210, 300, 649, 270)


def summed_loss(logits, targets):
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), reduction="sum")


def one_pass_per_episode(model, prompt, episodes):
    for episode in episodes:
        logits = model(input_ids=torch.cat([prompt, episode], 1)).logits
        summed_loss(logits[:, prompt.size(1) - 1 : -1], episode).backward()


def prompt_once(model, prompt, episodes):
    shared = prompt[:, :-1]  # the last prompt token predicts each episode's first token: it goes with the episode
    cache = model(input_ids=shared, use_cache=True).past_key_values
    keys_values = [(layer.keys, layer.values) for layer in cache.layers]
    leaves = [(k.detach().requires_grad_(), v.detach().requires_grad_()) for k, v in keys_values]
    for episode in episodes:
        episode_cache = DynamicCache()
        for layer, (k, v) in enumerate(leaves):
            episode_cache.update(k, v, layer)
        ids = torch.cat([prompt[:, -1:], episode], 1)
        positions = torch.arange(shared.size(1), shared.size(1) + ids.size(1)).unsqueeze(0)
        logits = model(input_ids=ids, past_key_values=episode_cache, position_ids=positions).logits
        summed_loss(logits[:, :-1], episode).backward()
    torch.autograd.backward(
        [t for pair in keys_values for t in pair], grad_tensors=[t.grad for pair in leaves for t in pair]
    )


def gradients(model, way, prompt, episodes):
    model.zero_grad(set_to_none=True)
    start = time.perf_counter()
    way(model, prompt, episodes)
    seconds = time.perf_counter() - start
    return seconds, [p.grad.clone() for p in model.parameters() if p.requires_grad]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lora", action="store_true", help="LoRA rank 8 (notebook 09's GRPO) instead of full")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(
        str(embedded_checkpoint()), dtype=torch.float32, attn_implementation="sdpa"
    )
    if args.lora:
        from peft import get_peft_model

        model = get_peft_model(model, lora_config(True, rank=8))
        for name, p in model.named_parameters():  # B starts at zero: give it values, so A's gradients are not zero
            if "lora_B" in name:
                torch.nn.init.normal_(p, std=0.01)
    model.train()
    vocab = model.config.vocab_size
    prompt = torch.randint(0, vocab, (1, PROMPT_TOKENS))
    episodes = [torch.randint(0, vocab, (1, n)) for n in EPISODE_TOKENS]
    for _ in range(2):
        separate, reference = gradients(model, one_pass_per_episode, prompt, episodes)
        shared, grads = gradients(model, prompt_once, prompt, episodes)
        difference = sum((a - b).pow(2).sum() for a, b in zip(reference, grads)).sqrt()
        relative = float(difference / sum(a.pow(2).sum() for a in reference).sqrt())
        print(
            f"one pass per episode {separate:.1f} s, prompt once {shared:.1f} s ({separate / shared:.2f}x); "
            f"gradients differ by {relative:.1e} of their norm",
            flush=True,
        )
