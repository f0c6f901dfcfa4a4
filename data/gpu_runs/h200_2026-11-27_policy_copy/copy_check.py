"""On the GPU: PolicyCopy (new code) gives the LoRA-merged policy's logits, on CUDA."""

import sys

import torch

sys.path.insert(0, ".gpu/new")
from types import SimpleNamespace

from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer

from course_lib import rollout_bridge

policy = get_peft_model(
    AutoModelForCausalLM.from_pretrained("/tmp/rand", dtype=torch.float32).cuda(),
    LoraConfig(r=8, target_modules="all-linear", task_type="CAUSAL_LM"),
)
with torch.no_grad():
    for n, p in policy.named_parameters():
        if "lora_B" in n:
            p.normal_(0, 0.5)
copy = rollout_bridge.PolicyCopy("/tmp/rand", 4, device="cuda", dtype="float32")
trainer = SimpleNamespace(model=policy, accelerator=SimpleNamespace(unwrap_model=lambda m: m))
generate = copy(trainer)
tok = AutoTokenizer.from_pretrained("/tmp/rand")
ids = torch.tensor([tok("Your move: the centre.", add_special_tokens=False)["input_ids"]]).cuda()
policy.eval()
with torch.no_grad():
    want = policy(input_ids=ids).logits
    got = copy.model.network(input_ids=ids).logits
print("copy_check max |logit diff| on", copy.model.network.device, float((want - got).abs().max()))
print("copy_check sample:", generate(ids.tolist(), {"max_tokens": 4, "temperature": 1.0, "top_p": 1.0}))
