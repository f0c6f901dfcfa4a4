"""Wiki search over MCP (Model Context Protocol): the same tools, served by a local MCP server.

MCP is a standard way to offer tools to any model client. `load_environment()` here builds a
vf.MCPEnv that starts mcp_server.py (next to this file) as a child process and calls the wiki
tools through it; data, prompt and reward are those of wiki_search (`__init__.py`).

    import verifiers as vf
    env = vf.load_environment("wiki_search.mcp_env")
"""

import sys
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import verifiers as vf

import wiki_search as wiki

PACKAGE_PARENT = Path(__file__).resolve().parent.parent


def mcp_server_config() -> dict:
    """How vf.MCPEnv starts the wiki MCP server (mcp_server.py): a local process speaking MCP over
    stdin/stdout (no network). PYTHONPATH is the folder holding wiki_search/, so the server finds
    it wherever this copy lives, installed or not."""
    return {
        "name": "wiki",
        "command": sys.executable,
        "args": ["-m", f"{__package__}.mcp_server"],
        "env": {"PYTHONPATH": str(PACKAGE_PARENT)},
        "description": "The course's tiny wiki",
    }


@contextmanager
def server_stderr_with_a_file_descriptor():
    """verifiers starts MCP servers with mcp's `stdio_client`, whose `errlog` (the server's
    stderr) defaults to `sys.stderr` as it was when mcp was imported. In Jupyter that is the
    kernel's output stream, which has no file descriptor, and starting the server fails with
    `UnsupportedOperation: fileno`. While the environment connects, give it Python's own stderr."""
    from verifiers.legacy.envs.experimental import mcp_env

    original = mcp_env.stdio_client
    mcp_env.stdio_client = partial(original, errlog=sys.__stderr__)
    try:
        yield
    finally:
        mcp_env.stdio_client = original


def load_environment(
    max_turns: int = 8,
    num_eval_examples: int = -1,
    seed: int = 0,
    max_answer_words: int = wiki.MAX_ANSWER_WORDS,
    **kwargs,
) -> "vf.MCPEnv":
    """The wiki environment with its tools behind an MCP server. Building it starts the server
    (verifiers 0.3.1 connects in __init__); stop it with `await env.teardown_mcp_servers()`
    (verifiers otherwise only stops it when Python exits)."""
    with server_stderr_with_a_file_descriptor():
        env = vf.MCPEnv(
            mcp_servers=[mcp_server_config()],
            max_turns=max_turns,
            **wiki.environment_kwargs(num_eval_examples, seed, max_answer_words),
            **kwargs,
        )
    # MCPEnv learns its tools after ToolEnv.__init__ built the tool metrics, so it only counts
    # total_tool_calls; add the per-tool counts that vf.ToolEnv has.
    for name in env.tool_map:
        env.tool_monitor_rubric.add_tool_metric(name)
    return env
