"""The course's wiki tools as a local MCP (Model Context Protocol) server.

MCP is a standard way to offer tools to any model client. This server speaks it over
stdin/stdout: the client (here vf.MCPEnv) starts it as a child process, sends JSON-RPC
requests (initialize, tools/list, tools/call) on its stdin and reads replies on its stdout.
No network, no port. It exits when its stdin closes, i.e. when the client disconnects or dies.

    python -m wiki_search.mcp_server     # normally started by a client (mcp_env.py), not by hand

The tools are the very functions of wiki_search/__init__.py: FastMCP builds the MCP tool
schemas from the same type hints and docstrings that verifiers uses, so there is one
implementation and the model sees the same tools either way.
"""

from mcp.server.fastmcp import FastMCP

from wiki_search import read_section, search_pages, view_sections

# stdout carries the protocol, so the server must never print; FastMCP logs to stderr, and
# only warnings, to keep notebooks quiet.
server = FastMCP("wiki", instructions="Search and read the course's tiny wiki.", log_level="WARNING")
for tool in (search_pages, view_sections, read_section):
    server.tool()(tool)

if __name__ == "__main__":
    server.run(transport="stdio")
