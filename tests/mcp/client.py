"""A real MCP client (the `mcp` package from PyPI) against `toolcell serve`, in one era.

Usage: client.py TOOLCELL TOOLS_DIR AUDIT_FILE MODE   (MODE: "auto" or "legacy")

It lists the tools, calls echo (through call_tool and directly), calls with bad arguments
(expects isError), calls an unknown tool (expects the -32602 protocol error), cancels a call
that never ends, and then makes another call. Any failed expectation exits non-zero.
"""

import os
import sys
import time

import anyio
from mcp import Client, MCPError, StdioServerParameters
from checks import expect, text_of


async def main(toolcell, tools_dir, audit, mode):
    # The SDK starts the server with a few variables only (HOME, PATH, ...): the tests' compile
    # cache (TOOLCELL_CACHE_DIR, TOOLCELL_CACHE_KEY) is handed on by name, or the server would
    # write the user's own.
    server = StdioServerParameters(
        command=toolcell,
        args=["serve", "--tools", tools_dir, "--audit", audit],
        env={name: value for name, value in os.environ.items() if name.startswith("TOOLCELL_")},
    )
    async with Client(server, mode=mode, read_timeout_seconds=30) as client:
        version = client.session.protocol_version
        print(f"connected ({mode}), protocol {version}")
        # Each mode must reach its own era: the stateless protocol when the client may choose,
        # the initialize handshake when it is told to.
        wanted = "2026-07-28" if mode == "auto" else "2025-11-25"
        expect(version == wanted, f"the {mode} client speaks {wanted} (got {version})")

        tools = await client.list_tools()
        names = [tool.name for tool in tools.tools]
        core = ["clock", "edit_file", "glob", "grep", "list_dir", "read_file", "write_file", "find_tool", "call_tool"]
        expect(names == core, f"tools/list is the core schemas in order: {names}")
        clock = tools.tools[0]
        expect(clock.annotations is not None and clock.annotations.read_only_hint, "clock is annotated read-only")

        result = await client.call_tool("call_tool", {"name": "echo", "arguments": {"text": "héllo"}})
        expect(not result.is_error and text_of(result) == "héllo", "echo through call_tool")
        result = await client.call_tool("echo", {"text": "direct"})
        expect(not result.is_error and text_of(result) == "direct", "echo called by name")

        result = await client.call_tool("echo", {"text": 7})
        expect(result.is_error, "bad arguments are a tool error (isError)")
        expect("/text" in text_of(result), f"and the error names the failing path: {text_of(result)!r}")

        try:
            await client.call_tool("no_such_tool", {})
            expect(False, "an unknown tool is a protocol error")
        except MCPError as error:
            expect(error.code == -32602, f"an unknown tool is JSON-RPC error -32602 (got {error.code})")

        started = time.monotonic()
        with anyio.move_on_after(0.5) as scope:
            await client.call_tool("hostile", {"do": "spin"})
        expect(scope.cancelled_caught, "a call that never ends is cancelled by the client")
        expect(time.monotonic() - started < 4.0, "well before the tool's own 5 s deadline")

        result = await client.call_tool("call_tool", {"name": "echo", "arguments": {"text": "after"}})
        expect(not result.is_error and text_of(result) == "after", "the next call succeeds")


if __name__ == "__main__":
    toolcell, tools_dir, audit, mode = sys.argv[1:5]
    anyio.run(main, toolcell, tools_dir, audit, mode)
    print("client: all checks passed")
