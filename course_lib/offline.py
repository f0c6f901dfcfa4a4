"""Drive a verifiers environment with no server and no model.

`OfflineClient` is a verifiers client answered by Python (`respond`): the scripted players, the
environment checker's fuzzer and the tests are subclasses. `run_coroutine` runs an environment's
async code from sync code, also inside Jupyter where an event loop is already running (the play
widget, the checker, the GRPO bridge).
"""

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

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


def run_coroutine(coroutine):
    """Run async code from sync code, also inside Jupyter where an event loop is already running."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
