"""The local server: a real answer from the embedded model, and never a process left behind."""

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
import verifiers as vf
from openai import AsyncOpenAI

from course_lib import serving
from course_lib.profiles import PROFILES, get_profile
from course_lib.serving import LocalServerClient, Server


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0): count it as gone
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split()[2] != "Z"


def _wait_gone(pid: int, timeout_s: float = 20) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.2)
    return False


def test_chat_completion_then_clean_stop():
    with serving.start_server() as server:
        pid = server.process.pid
        response = server.openai.chat.completions.create(
            model=server.model,
            messages=[{"role": "user", "content": "What is the capital of France?"}],
            max_tokens=16,
            temperature=0.2,
        )
        assert response.choices[0].message.content.strip()
        assert response.usage.completion_tokens > 0
        # The sampling trap: repeated rollouts of one prompt must be able to differ.
        answers = {server.chat("Write one word.", max_tokens=6, temperature=1.5) for _ in range(4)}
        assert len(answers) > 1, answers
    assert _wait_gone(pid, 1), "server still running after the with block"


def test_stopped_on_exception_inside_the_block():
    with pytest.raises(KeyboardInterrupt):
        with serving.start_server() as server:
            pid = server.process.pid
            raise KeyboardInterrupt
    assert _wait_gone(pid, 1)


def test_server_dies_with_its_parent_even_on_sigkill():
    """A notebook kernel that crashes must not leave an orphan server."""
    script = (
        "from course_lib.serving import start_server\n"
        "s = start_server()\nprint(s.process.pid, flush=True)\nimport time; time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        server_pid = int(parent.stdout.readline())
        assert _alive(server_pid)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    assert _wait_gone(server_pid), "orphan server survived its parent"


def test_server_outlives_the_thread_that_started_it_and_needs_no_venv_on_path(monkeypatch):
    """Catches: PR_SET_PDEATHSIG killing the server when the worker thread that started it
    ends, and "FileNotFoundError: [Errno 2]" from a kernel started without activating the venv."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    started = []
    thread = threading.Thread(target=lambda: started.append(serving.start_server()))
    thread.start()
    thread.join()
    with started[0] as server:
        time.sleep(2)
        assert server.process.poll() is None, server.log_tail()
        assert server.chat("Say hi.", max_tokens=4)


def test_a_missing_program_is_named_and_found_next_to_python(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", "")
    assert serving.server_command(get_profile("cpu"), "model", 1)[0] == os.path.join(serving.BIN_DIR, "transformers")
    monkeypatch.setattr(serving, "BIN_DIR", str(tmp_path))
    with pytest.raises(serving.ServerError, match=f"Cannot find the program 'transformers', neither in {tmp_path}"):
        serving.server_command(get_profile("cpu"), "model", 1)


def test_busy_port_is_a_clear_error():
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        with pytest.raises(serving.ServerError, match=f"Port {port} is busy"):
            serving.start_server(port=port)


def test_crashing_server_reports_its_log(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(serving.ServerError, match="exited with code") as error:
        serving.start_server(model_path=str(tmp_path))
    assert "Last lines of" in str(error.value)


def test_gpu_profile_without_gpu_is_a_clear_error():
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(serving.ServerError, match="needs a GPU"):
        serving.start_server(PROFILES["gpu"])


def test_external_endpoint_without_key_says_how_to_configure(monkeypatch):
    monkeypatch.delenv(serving.API_KEY_VARIABLE, raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(serving.EndpointNotConfigured, match=serving.API_KEY_VARIABLE):
        serving.external_endpoint()


def test_external_endpoint_reads_the_environment(monkeypatch):
    monkeypatch.setenv(serving.API_KEY_VARIABLE, "sk-test")
    monkeypatch.setenv(serving.API_BASE_URL_VARIABLE, "http://127.0.0.1:9/v1")
    endpoint = serving.external_endpoint()
    assert (endpoint.base_url, endpoint.model, endpoint.api_key) == ("http://127.0.0.1:9/v1", "gpt-5-mini", "sk-test")
    endpoint.stop()  # nothing to stop: must not fail


# --- Local server client fixes ------------------------------------------------------------------


def test_local_server_client_sends_max_tokens_and_drops_null_fields(monkeypatch):
    """Catches: transformers serve ignoring max_completion_tokens (1024 tokens per turn) and its
    HTTP 500 on "tool_calls": null in earlier assistant turns."""
    sent = {}

    async def fake_post(client, path, *, body, extra_headers=None):
        sent.update(body)
        raise RuntimeError("stop here")

    import verifiers.legacy.clients.openai_chat_completions_client as chat_module

    monkeypatch.setattr(chat_module, "post_chat_completion_with_routed_experts_sidecar", fake_post)
    client = LocalServerClient(AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="x"))
    prompt = [
        vf.UserMessage(content="hi"),
        vf.AssistantMessage(content="<move>4</move>"),
        vf.UserMessage(content="again"),
    ]
    with pytest.raises(vf.ModelError):
        asyncio.run(client.get_response(prompt, model="m", sampling_args={"max_tokens": 7}))
    assert sent["max_tokens"] == 7 and sent["max_completion_tokens"] == 7
    assert all(None not in message.values() for message in sent["messages"])
    assert "tool_calls" not in sent["messages"][1]


def test_the_client_fixes_transformers_serve_only():
    """Catches: the max_tokens field reaching an OpenAI reasoning model (it refuses it)."""

    def client(kind):
        return Server(base_url="http://127.0.0.1:9/v1", model="m", kind=kind).client

    assert type(client("transformers")) is LocalServerClient
    assert type(client("vllm")) is vf.OpenAIChatCompletionsClient
    assert type(client("api")) is vf.OpenAIChatCompletionsClient


def test_start_model_runs_the_model_in_process_on_cpu_profiles():
    """Catches: evaluations on a CPU falling back to the one-request-at-a-time server."""
    from course_lib.local_model import LocalModel

    with serving.start_model(get_profile("smoke")) as model:
        assert isinstance(model, LocalModel) and model.max_batch_size == get_profile("smoke").max_concurrent
