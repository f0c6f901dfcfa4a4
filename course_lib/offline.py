"""Drive a verifiers environment with no server and no model.

`OfflineClient` is a verifiers client answered by Python (`respond`): the scripted players, the
environment checker's fuzzer and the tests are subclasses. `run_coroutine` runs an environment's
async code from sync code, also inside Jupyter where an event loop is already running (the play
widget, the checker, the GRPO bridge).
"""

import asyncio
import threading
import time

import verifiers as vf


class OfflineClient(vf.Client):
    """A verifiers client with no API behind it: subclasses answer in `respond`.

    verifiers' Client converts prompts, tools and responses to and from an API's native format;
    here the native format is verifiers' own, so every conversion is the identity. `respond`
    returns the assistant's text, or a whole `vf.ResponseMessage` (e.g. with tool calls).
    """

    def __init__(self):
        super().__init__(None)  # no underlying API client

    def setup_client(self, config):
        return None

    async def to_native_tool(self, tool):
        return tool

    async def to_native_prompt(self, messages):
        return messages, {}

    def respond(self, prompt, **kwargs) -> "str | vf.ResponseMessage":
        raise NotImplementedError

    async def get_native_response(self, prompt, model, sampling_args, tools=None, **kwargs):
        message = self.respond(prompt, **kwargs)
        if isinstance(message, str):
            message = vf.ResponseMessage(content=message, finish_reason="stop", is_truncated=False)
        return vf.Response(id=f"offline-{len(prompt)}", created=int(time.time()), model=model, message=message)

    async def raise_from_native_response(self, response) -> None:
        return None

    async def from_native_response(self, response) -> vf.Response:
        return response

    async def close(self) -> None:
        return None


LOOP_THREAD = "course-event-loop"
_background_loop: asyncio.AbstractEventLoop | None = None
_background_loop_lock = threading.Lock()


def background_loop() -> asyncio.AbstractEventLoop:
    """One event loop for the whole process, in a thread of its own, started on first use."""
    global _background_loop
    with _background_loop_lock:
        if _background_loop is None:
            _background_loop = asyncio.new_event_loop()
            threading.Thread(target=_background_loop.run_forever, name=LOOP_THREAD, daemon=True).start()
    return _background_loop


def run_coroutine(coroutine):
    """Run async code from sync code, also inside Jupyter where an event loop is already running.
    Every call runs on the same background loop (a GRPO step's episodes, the next step's, a check's);
    an interrupt (Ctrl-C, Jupyter's stop button) cancels the coroutine instead of waiting for it."""
    loop = background_loop()
    if threading.current_thread().name == LOOP_THREAD:
        coroutine.close()
        raise RuntimeError("run_coroutine was called from code on its own event loop: await the coroutine instead")
    future = asyncio.run_coroutine_threadsafe(coroutine, loop)
    try:
        return future.result()
    except BaseException:
        future.cancel()
        raise
