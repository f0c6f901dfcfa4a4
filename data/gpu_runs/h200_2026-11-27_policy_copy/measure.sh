source .gpu/check.sh
python3 - <<'PY' || die "random-weight model"
import shutil, torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
torch.manual_seed(0)
AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(".gpu/smollm2_config")).save_pretrained("/tmp/rand")
AutoTokenizer.from_pretrained(".gpu/smollm2_config").save_pretrained("/tmp/rand")
for name in ("generation_config.json", "chat_template.jinja"):
    shutil.copy(f".gpu/smollm2_config/{name}", "/tmp/rand/")
print("random-weight SmolLM2-135M at /tmp/rand")
PY
# copy_check ran in the first call
for way in old new; do
  echo "== $way"; date -u +%H:%M:%S
  PYTHONPATH=$PYTHONPATH:$PWD/.gpu/stub timeout 170 python3 .gpu/$way/dev/measure_grpo_generation.py --model /tmp/rand --steps 2 > $OUT/$way.log 2>&1
  echo "rc=$?"; grep -v "it/s\]" $OUT/$way.log | tail -4
done
date -u +%H:%M:%S
