"""GRPO on tic-tac-toe from the command line: the `full` profile's multi-GPU entry point.
The notebook (09) runs the same code in one process.

    # one GPU serves generation with vLLM, the others train (here 1 + 3 GPUs):
    CUDA_VISIBLE_DEVICES=0 trl vllm-serve --model MODEL &
    CUDA_VISIBLE_DEVICES=1,2,3 accelerate launch --config_file course_lib/configs/accelerate_full.yaml \\
        -m course_lib.train_grpo --profile full --model MODEL

`trl vllm-serve` is deprecated in TRL 1.16 (removal planned for 2.0): it now only starts vLLM's
own server with the flags a trainer needs (weight transfer over NCCL, processed logprobs) and
prints the equivalent `VLLM_SERVER_DEV_MODE=1 vllm serve ...` command; run that one directly
once `trl vllm-serve` is gone.

MODEL defaults to the profile's SFT checkpoint (notebook 08); without one the script stops
rather than train the base model unnoticed. A run that is interrupted resumes from its last checkpoint when started again.
"""

import argparse
import json
from pathlib import Path

from course_lib.grpo import build_grpo_trainer, latest_checkpoint, training_environment
from course_lib.profiles import get_profile, output_dir
from course_lib.sft import final_checkpoint, save_final


def default_model(profile) -> str:
    final = final_checkpoint(profile)
    if not (final / "config.json").is_file():
        raise SystemExit(f"No SFT checkpoint at {final}: run notebook 08 (08_sft_warmup.ipynb) first, or pass "
                         "--model (a checkpoint path or Hub id) to start from another model on purpose.")
    return str(final)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", help="smoke, cpu, gpu or full (default: from the hardware)")
    parser.add_argument("--model", help="checkpoint or Hub id to start from")
    parser.add_argument("--output-dir", type=Path, help="default: outputs/<profile>/grpo")
    parser.add_argument("--max-steps", type=int, help="override the profile's grpo_max_steps")
    args = parser.parse_args(argv)

    profile = get_profile(args.profile)
    out = args.output_dir or output_dir(profile) / "grpo"
    overrides = {"max_steps": args.max_steps} if args.max_steps else {}
    model = args.model or default_model(profile)
    trainer = build_grpo_trainer(profile, training_environment(profile), model, out, **overrides)
    trainer.train(resume_from_checkpoint=latest_checkpoint(out))
    if trainer.accelerator.is_main_process:
        save_final(trainer, out / "final", model)
        (out / "log_history.json").write_text(json.dumps(trainer.state.log_history, indent=1))


if __name__ == "__main__":
    main()
