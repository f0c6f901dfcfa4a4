#!/usr/bin/env bash
# GPU-machine preparation for the course repo. Run from the repo root on the device:
#   run(command="bash .gpu/check.sh", carry=[".whl", ".gpu"], kind="nvidia-h200")
# It installs the carried wheels (.whl: verifiers, trl, datasets and what they import that the
# image lacks), puts the repo on PYTHONPATH, prints versions and the GPU, and stops with a clear
# message if an import fails. Measurement lines go after the last section below.
#
# Optional: GPU_FALLBACK_FORCE="peft filelock" installs those wheels from .gpu/fallback_whl even when
# the image's version already meets the carried wheels' requirements (e.g. to match requirements.txt pins).

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
REPO="$PWD"
export PYTHONUNBUFFERED=1
# No network on the device: fail fast instead of retrying the Hub; trackio is not carried anyway.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 COURSE_TRACKIO=0

die() {
    echo
    echo "=============================================================================="
    echo "GPU CHECK STOPPED: $*"
    echo "Fix it here, then rerun: download the missing wheel into .whl with the pip download command"
    echo "of /work/.library/device/README.md (NAME==the version 'python -m pip show NAME' gives here),"
    echo "or add its name to GPU_FALLBACK_FORCE if it is in .gpu/fallback_whl."
    echo "=============================================================================="
    exit 1
}

# --- 1. Wheels, exactly as the device README says --------------------------------------------
echo "== installing $(ls .whl/*.whl | wc -l) wheels from .whl into /tmp/site"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site || die "pip install of .whl/*.whl failed (see pip's message above)"

# The repo first (course_lib), then course_lib/envs (the environments are top-level packages:
# tictactoe, reverse_text, double_check, wiki_search; pyproject.toml maps them so when installed).
export PYTHONPATH="$REPO:$REPO/course_lib/envs:$PYTHONPATH"

# --- 2. The carried wheels' requirements against the image's packages ----------------------------
# Prints what the image lacks (expected: the verifiers dependencies skipped on purpose) and what is
# too old; installs a version-matched wheel from .gpu/fallback_whl for anything too old.
echo "== requirements of the carried wheels vs the image"
FALLBACKS=$(python3 - <<'EOF'
import glob, os, re
from importlib import metadata
from packaging.requirements import Requirement

def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()

carried = {}
for info in glob.glob("/tmp/site/*.dist-info"):
    dist = metadata.Distribution.at(info)
    carried[norm(dist.metadata["Name"])] = dist
fallback = {norm(os.path.basename(w).split("-")[0]): w for w in glob.glob(".gpu/fallback_whl/*.whl")}
force = {norm(n) for n in os.environ.get("GPU_FALLBACK_FORCE", "").split()}
missing, too_old, install = {}, {}, set()
for name, dist in sorted(carried.items()):
    for line in dist.requires or []:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue  # an extra's requirement, or another platform's
        target = norm(req.name)
        if target in carried:
            have = carried[target].version
        else:
            try:
                have = metadata.version(req.name)
            except metadata.PackageNotFoundError:
                missing.setdefault(target, []).append(name)
                continue
        if req.specifier and not req.specifier.contains(have, prereleases=True):
            too_old.setdefault(target, []).append(f"{name} wants {req.specifier}, image has {have}")
            if target in fallback:
                install.add(fallback[target])
for target in force:
    if target in fallback:
        install.add(fallback[target])
    else:
        print(f"  GPU_FALLBACK_FORCE: no wheel for {target} in .gpu/fallback_whl", file=__import__("sys").stderr)
import sys
for target, who in sorted(missing.items()):
    print(f"  not installed (fine if never imported): {target:24} <- {', '.join(sorted(set(who)))}", file=sys.stderr)
for target, why in sorted(too_old.items()):
    fix = "-> fallback wheel" if target in fallback else "-> NO fallback wheel"
    print(f"  VERSION MISMATCH {target}: {'; '.join(why)} {fix}", file=sys.stderr)
print(" ".join(sorted(install)))
EOF
) || die "the requirements check itself failed (is 'packaging' importable?)"
if [ -n "$FALLBACKS" ]; then
    echo "== installing fallback wheels (the image's version is too old or forced): $FALLBACKS"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $FALLBACKS \
        || die "pip install of the fallback wheels failed"
fi

# --- 3. Versions and the GPU ------------------------------------------------------------------
echo "== versions"
python3 -c 'import verifiers, trl, datasets; print("verifiers", verifiers.__version__, "| trl", trl.__version__, "| datasets", datasets.__version__)' \
    || die "import verifiers, trl, datasets failed (the traceback above names the missing module)"
python3 - <<'EOF'
import sys
from importlib import metadata
names = ["torch", "transformers", "peft", "accelerate", "tokenizers", "safetensors", "numpy", "pandas", "pyarrow",
         "fsspec", "huggingface-hub", "pydantic", "openai", "anthropic", "protobuf", "typing-extensions", "anyio",
         "filelock"]
versions = []
for name in names:
    try:
        versions.append(f"{name} {metadata.version(name)}")
    except metadata.PackageNotFoundError:
        versions.append(f"{name} MISSING")
print(f"python {sys.version.split()[0]} | " + " | ".join(versions))
# The course pins (requirements.txt) for packages the image provides; torch 2.13 cannot travel.
pins = {"torch": "2.13.0", "transformers": "5.17.0", "peft": "0.21.2", "accelerate": "1.15.0", "filelock": "4.3.1"}
for name, pin in pins.items():
    try:
        have = metadata.version(name).split("+")[0]
    except metadata.PackageNotFoundError:
        have = "missing"
    if have != pin:
        print(f"  note: requirements.txt pins {name}=={pin}, this machine has {have}")
EOF
nvidia-smi -L || echo "  (nvidia-smi -L failed)"

# --- 4. Import-time checks: the lazy surfaces and the course modules ----------------------------
# `import verifiers` and `import trl` are lazy: touch what the course uses so the real imports run.
echo "== import checks"
python3 -c '
import verifiers as vf
for name in ("Client", "Environment", "MultiTurnEnv", "SingleTurnEnv", "Rubric", "Parser", "XMLParser"):
    getattr(vf, name)
try:  # expected to fail: openai-agents and mcp (ToolEnv only, not tic-tac-toe) are not carried
    vf.ToolEnv
except Exception as error:
    print("  note: vf.ToolEnv does not import here (expected; not needed for tic-tac-toe):", repr(error)[:160])
from verifiers.types import Response, ResponseMessage, ResponseTokens, Usage
from trl import GRPOConfig, GRPOTrainer
from trl.models import unwrap_model_for_generation
from datasets import Dataset
import torch
print("verifiers legacy surface, trl GRPO, datasets: OK | torch.cuda.is_available():", torch.cuda.is_available())
' || die "an import failed (the traceback above names the missing module)"
python3 .gpu/import_check.py || die "course_lib imports or the tic-tac-toe environment failed (traceback above)"
echo "== ready: PYTHONPATH=$PYTHONPATH"

# --- 5. Measurements (to be added) -------------------------------------------------------------
