"""Start and stop a profile's model: an OpenAI-compatible server, or the model in this process.

`start_server` runs an OpenAI-compatible server: `transformers serve` on CPU profiles (notebook 12
shows it), `vllm serve` on GPU profiles (or `transformers serve` on the GPU where vLLM cannot run,
see `profiles.get_profile`). `start_model` is what evaluations use, the fastest way to
answer many requests at once: vLLM's server on a GPU, and on a CPU the model loaded in this process
with a client that batches concurrent requests (`course_lib.local_model`), several times faster than
`transformers serve`, which answers one request at a time. Both give `.client` (a verifiers
client), `.model` (the name to put in requests), `.chat()` and `.stop()`. A server is always stopped: on `stop()`,
at the end of a `with start_server():` block (exceptions and KeyboardInterrupt included), when the
Python process exits, and when the kernel process dies (a small supervisor process watches
it). `external_endpoint()` points the same interface at an API.
"""

import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import verifiers as vf

from course_lib.hardware import cuda_capability, precision
from course_lib.local_model import LocalModel
from course_lib.models import resolve_model
from course_lib.profiles import Profile, get_profile, output_dir

API_KEY_VARIABLE = "COURSE_API_KEY"
API_BASE_URL_VARIABLE = "COURSE_API_BASE_URL"
API_MODEL_VARIABLE = "COURSE_API_MODEL"

# Runs in the child: start the server, then watch the parent (the notebook kernel). When the
# parent dies, even by SIGKILL, the child is re-parented: it then stops the server. (Linux's
# PR_SET_PDEATHSIG would be simpler, but it fires when the parent *thread* that started the
# server ends, so a server started from a worker thread died with that thread.)
_SUPERVISE = (
    "import os, signal, subprocess, sys, time\n"
    "signal.signal(signal.SIGTERM, lambda *_: None)  # stop() signals the group: outlive the server\n"
    "parent, server = int(sys.argv[1]), subprocess.Popen(sys.argv[2:])\n"
    "while server.poll() is None:\n"
    "    if os.getppid() != parent:\n"
    "        os.killpg(0, signal.SIGTERM)\n"
    "        try: server.wait(15)\n"
    "        except subprocess.TimeoutExpired: os.killpg(0, signal.SIGKILL)\n"
    "    time.sleep(0.5)\n"
    "sys.exit(server.returncode)\n"
)
# A kernel started without activating its virtual environment does not have the environment's
# bin/ on PATH: look for programs next to this Python first, and give the server that PATH too.
BIN_DIR = str(Path(sys.executable).parent)


class ServerError(RuntimeError):
    """The server could not start or died; the message ends with the last lines of its log."""


class EndpointNotConfigured(RuntimeError):
    """No API key is set for an external endpoint."""


class LocalServerClient(vf.OpenAIChatCompletionsClient):
    """verifiers' chat client with two fixes for `transformers serve` (5.17, with verifiers 0.3.1).

    1. verifiers sends `max_tokens` as `max_completion_tokens`, which transformers serve ignores
       (it then generates up to 1024 tokens per turn): we send `max_tokens` as well.
    2. verifiers sends earlier assistant turns with `"tool_calls": null`, on which transformers
       serve fails with HTTP 500 (TypeError), so any multi-turn game breaks: we drop null fields.
    `Server.client` uses it for `transformers serve` only: OpenAI's reasoning models refuse
    `max_tokens`, so APIs (and vLLM) get the plain client.
    """

    async def to_native_prompt(self, messages):
        native, extra = await super().to_native_prompt(messages)
        return [{key: value for key, value in message.items() if value is not None} for message in native], extra

    async def get_native_response(self, prompt, model, sampling_args, tools=None, **kwargs):
        if sampling_args.get("max_tokens") is not None:
            extra_body = {"max_tokens": sampling_args["max_tokens"], **(sampling_args.get("extra_body") or {})}
            sampling_args = {**sampling_args, "extra_body": extra_body}
        return await super().get_native_response(prompt, model, sampling_args, tools, **kwargs)


@dataclass
class Server:
    base_url: str  # ends with /v1
    model: str  # the name to put in requests
    kind: str = "api"  # "transformers" or "vllm" for the servers we start, "api" for an external endpoint
    api_key: str = "local"
    request_timeout_s: float = 600
    process: subprocess.Popen | None = None
    log_path: Path | None = None
    _log_file: object = field(default=None, repr=False)

    @property
    def client(self) -> vf.Client:
        """A verifiers client (verifiers 0.3.1 refuses a bare AsyncOpenAI), with the fixes its server needs."""
        from openai import AsyncOpenAI

        client_class = LocalServerClient if self.kind == "transformers" else vf.OpenAIChatCompletionsClient
        return client_class(
            AsyncOpenAI(base_url=self.base_url, api_key=self.api_key, timeout=self.request_timeout_s, max_retries=0)
        )

    @property
    def openai(self):
        from openai import OpenAI

        return OpenAI(base_url=self.base_url, api_key=self.api_key, timeout=self.request_timeout_s, max_retries=0)

    def chat(self, message: str | list[dict], **sampling) -> str:
        """One chat completion; `message` is a user message or a full message list."""
        messages = [{"role": "user", "content": message}] if isinstance(message, str) else message
        response = self.openai.chat.completions.create(model=self.model, messages=messages, **sampling)
        return response.choices[0].message.content

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_path or not self.log_path.is_file():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """Stop the server and every process it started (its whole process group)."""
        if self.process is None:
            return
        if self.process.poll() is None:
            _signal_group(self.process, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                _signal_group(self.process, signal.SIGKILL)
                self.process.wait(timeout=15)
        if self._log_file:
            self._log_file.close()
        self.process = None

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.stop()


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)  # the server is its own group leader (start_new_session)
    except ProcessLookupError:
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_is_busy(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return False
        except OSError:
            return True


def find_program(name: str) -> str:
    """The path of the program `name`: next to this Python, else on PATH."""
    path = shutil.which(name, path=BIN_DIR) or shutil.which(name)
    if path is None:
        raise ServerError(
            f"Cannot find the program {name!r}, neither in {BIN_DIR} (next to this Python) "
            "nor on PATH. Install the course's requirements into this Python (make install), "
            "or start Jupyter from the environment where they are installed."
        )
    return path


def server_command(profile: Profile, model_path: str, port: int) -> list[str]:
    """`transformers serve` on the CPU, or on a GPU where vLLM cannot run (continuous batching serves
    concurrent requests together); `vllm serve` otherwise. The card's precision either way."""
    capability = cuda_capability()
    address = ["--host", "127.0.0.1", "--port", str(port)]
    if profile.server == "transformers":
        device = (
            ["--device", "cpu"]
            if capability is None
            else ["--device", "cuda", "--continuous-batching", "--dtype", precision(capability)]
        )
        return [find_program("transformers"), "serve", model_path, *device, *address]
    return [
        find_program("vllm"),
        "serve",
        model_path,
        *address,
        "--served-model-name",
        profile.model,
        "--dtype",
        precision(capability),
        "--gpu-memory-utilization",
        "0.85",
    ]


def start_server(
    profile: Profile | None = None,
    model_path: str | None = None,
    port: int | None = None,
    extra_args: tuple[str, ...] = (),
) -> Server:
    """Start a server for the profile's model (or `model_path`) and wait until it answers."""
    profile = profile or get_profile()
    if profile.server == "vllm" and cuda_capability() is None:
        raise ServerError(
            f"Profile {profile.name!r} needs a GPU for vLLM and none was found. "
            "Use COURSE_PROFILE=cpu to run on the CPU with the embedded model."
        )
    model_path = model_path or resolve_model(profile)
    if port is None:
        port = free_port()
    elif port_is_busy(port):
        raise ServerError(
            f"Port {port} is busy (another server still running? `lsof -i :{port}` shows it). "
            "Stop it, or pass another port, or port=None for a free one."
        )
    command = server_command(profile, model_path, port) + list(extra_args)
    log_dir = output_dir(profile) / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"server-{port}.log"
    log_file = open(log_path, "w")
    process = subprocess.Popen(
        [sys.executable, "-c", _SUPERVISE, str(os.getpid()), *command],
        stdout=log_file,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "PATH": os.pathsep.join([BIN_DIR, os.environ.get("PATH", "")])},
    )
    server = Server(
        base_url=f"http://127.0.0.1:{port}/v1",
        model=model_path if profile.server == "transformers" else profile.model,
        kind=profile.server,
        request_timeout_s=profile.request_timeout_s,
        process=process,
        log_path=log_path,
        _log_file=log_file,
    )
    atexit.register(server.stop)
    try:
        _wait_until_ready(server, profile.server_start_timeout_s)
    except BaseException:  # KeyboardInterrupt too: never leave a half-started server behind
        server.stop()
        raise
    return server


def _wait_until_ready(server: Server, timeout_s: float) -> None:
    health_url = server.base_url.removesuffix("/v1") + "/health"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise ServerError(
                f"The server exited with code {server.process.returncode} while starting. "
                f"Last lines of {server.log_path}:\n{server.log_tail()}"
            )
        try:
            with urllib.request.urlopen(health_url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise ServerError(
        f"The server did not answer within {timeout_s} s (raise the profile's "
        f"server_start_timeout_s on a slow machine). Last lines of {server.log_path}:\n"
        f"{server.log_tail()}"
    )


def start_model(
    profile: Profile | None = None, model_path: str | None = None, server_args: tuple[str, ...] = ()
) -> "LocalModel | Server":
    """The profile's model, ready for many requests at once: a server on a GPU (vLLM, else
    `transformers serve` with continuous batching), started with `server_args` added; on a CPU, the
    model in this process with a batching client (no server, several times the tokens per second of
    `transformers serve`). Use `.client`, `.model`, `.chat()`, and `.stop()` (or `with`)."""
    profile = profile or get_profile()
    if profile.server == "vllm" or cuda_capability() is not None:
        return start_server(profile, model_path, extra_args=server_args)
    return LocalModel(model_path or resolve_model(profile), max_batch_size=profile.max_concurrent)


def external_endpoint(default_model: str = "gpt-5-mini", request_timeout_s: float = 600) -> Server:
    """An API model (OpenAI or any compatible provider) configured by environment variables."""
    api_key = os.environ.get(API_KEY_VARIABLE) or os.environ.get("OPENAI_API_KEY")
    if not api_key:
        raise EndpointNotConfigured(
            f"No API key set, so the API model is skipped. To use one, set {API_KEY_VARIABLE} "
            f"(or OPENAI_API_KEY), and optionally {API_BASE_URL_VARIABLE} and {API_MODEL_VARIABLE}."
        )
    return Server(
        base_url=os.environ.get(API_BASE_URL_VARIABLE, "https://api.openai.com/v1"),
        model=os.environ.get(API_MODEL_VARIABLE, default_model),
        api_key=api_key,
        request_timeout_s=request_timeout_s,
    )
