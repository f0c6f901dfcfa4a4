"""Drive a verifiers environment with no server and no model.

`OfflineClient` is a verifiers client answered by Python (`respond`): the scripted players, the
environment checker's fuzzer and the tests are subclasses. `run_coroutine` runs an environment's
async code from sync code, also inside Jupyter where an event loop is already running (the play
widget, the checker, the GRPO bridge); `on_main_thread` gives the main thread async code's torch work.
"""

import asyncio
import queue
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import verifiers as vf


class OfflineClient(vf.Client):
    """A verifiers client with no API behind it: subclasses answer in `respond`.

    verifiers' Client converts prompts, tools and responses to and from an API's native format;
    here the native format is verifiers' own, so every conversion is the identity. `respond`
    returns the assistant's text, or a whole `vf.ResponseMessage` (e.g. with tool calls). A client
    that needs the request's state and sampling (`local_model.LocalModelClient`) overrides
    `get_native_response` instead.
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


# Torch's work belongs on one thread, the main one (which trains). Under libgomp, torch's OpenMP on Linux,
# every thread that runs parallel work keeps a pool of threads; once the pools outnumber the cores, waiting
# threads sleep instead of spinning, and generation and training both ran 15-20% slower (RESULTS.md, "Why,
# and one thread for torch").
_main_thread_work: queue.SimpleQueue = queue.SimpleQueue()
_main_thread_waits = threading.Event()  # set while the main thread waits in run_coroutine and runs the work
_main_thread_lock = threading.Lock()
_other_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="torch")  # when the main thread can't


async def on_main_thread(function, *args):
    """`function(*args)` run on the main thread: right here when this event loop is the main thread's
    (Jupyter's top-level `await`, `asyncio.run`), which blocks the loop meanwhile; by the main thread's
    wait when it waits in `run_coroutine`; else on one other thread."""
    if threading.current_thread() is threading.main_thread():
        return function(*args)
    with _main_thread_lock:
        main_waits = _main_thread_waits.is_set()
        if main_waits:
            work = Future()
            _main_thread_work.put((work, function, args))
    if not main_waits:
        return await asyncio.get_running_loop().run_in_executor(_other_thread, function, *args)
    return await asyncio.wrap_future(work)


def _run(work: Future, function, args) -> None:
    if not work.set_running_or_notify_cancel():
        return
    try:
        work.set_result(function(*args))
    except BaseException as error:
        work.set_exception(error)
        if not isinstance(error, Exception):  # an interrupt: stop the wait too
            raise


def run_coroutine(coroutine):
    """Run async code from sync code, also inside Jupyter where an event loop is already running.
    Every call runs on the same background loop (a GRPO step's episodes, the next step's, a check's);
    an interrupt (Ctrl-C, Jupyter's stop button) cancels the coroutine instead of waiting for it.
    Called from the main thread, the wait runs the torch work the coroutine sends (`on_main_thread`)."""
    loop = background_loop()
    if threading.current_thread().name == LOOP_THREAD:
        coroutine.close()
        raise RuntimeError("run_coroutine was called from code on its own event loop: await the coroutine instead")
    main_waits = threading.current_thread() is threading.main_thread() and not _main_thread_waits.is_set()
    if main_waits:
        _main_thread_waits.set()  # before the coroutine starts, so its first work comes here too
    future = asyncio.run_coroutine_threadsafe(coroutine, loop)
    try:
        if not main_waits:
            return future.result()
        future.add_done_callback(lambda _: _main_thread_work.put(None))  # ends the wait
        while (item := _main_thread_work.get()) is not None:
            _run(*item)
        return future.result()
    except BaseException:
        future.cancel()
        raise
    finally:
        if main_waits:
            with _main_thread_lock:
                _main_thread_waits.clear()
            while not _main_thread_work.empty():  # work queued as the coroutine ended
                item = _main_thread_work.get()
                if item is not None:
                    _run(*item)
