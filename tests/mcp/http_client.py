"""A real MCP client (the `mcp` package from PyPI) against `toolcell serve --http`, in one era.

Usage: http_client.py URL TOKEN MODE   (MODE: "auto" or "legacy"; TOKEN may be "-" for none)

It lists the tools, calls echo (by name and through call_tool), calls with bad arguments
(expects isError), calls an unknown tool (expects the -32602 protocol error), and cancels a
call that never ends, then makes another. Any failed expectation exits non-zero.

One thing is forgiven, and only once every check has passed: the `mcp` client's transport
delivering, as it closes, the late answer to the call cancelled above into the stream the
session has already closed (`anyio.ClosedResourceError` out of the transport's task group).
On a loaded machine the server ends the cancelled call after the last check; the client
library then raises on its way out although the session did all it was asked.
"""

import sys
import time

import anyio
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from checks import expect, text_of


# Set when every check of `main` has passed.
FINISHED = False


def closed_stream_only(error):
    """Whether `error` is a ClosedResourceError, or a group of nothing else."""
    if isinstance(error, BaseExceptionGroup):
        return all(closed_stream_only(inner) for inner in error.exceptions)
    return isinstance(error, anyio.ClosedResourceError)


async def main(url, token, mode):
    headers = {} if token == "-" else {"Authorization": f"Bearer {token}"}
    http = create_mcp_http_client(headers=headers)
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode, read_timeout_seconds=30) as client:
        version = client.session.protocol_version
        print(f"connected ({mode}) over HTTP, protocol {version}")
        wanted = "2026-07-28" if mode == "auto" else "2025-11-25"
        expect(version == wanted, f"the {mode} client speaks {wanted} (got {version})")

        tools = await client.list_tools()
        names = [tool.name for tool in tools.tools]
        expect("echo" not in names and names[-2:] == ["find_tool", "call_tool"], f"tools/list: {names}")

        result = await client.call_tool("call_tool", {"name": "echo", "arguments": {"text": "héllo"}})
        expect(not result.is_error and text_of(result) == "héllo", "echo through call_tool")
        result = await client.call_tool("echo", {"text": "direct"})
        expect(not result.is_error and text_of(result) == "direct", "echo called by name")

        result = await client.call_tool("echo", {"text": 7})
        expect(result.is_error and "/text" in text_of(result), "bad arguments are a tool error naming the path")

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

        result = await client.call_tool("echo", {"text": "after"})
        expect(not result.is_error and text_of(result) == "after", "the next call succeeds")
        global FINISHED
        FINISHED = True


if __name__ == "__main__":
    url, token, mode = sys.argv[1:4]
    try:
        anyio.run(main, url, token, mode)
    except BaseException as error:
        if not (FINISHED and closed_stream_only(error)):
            raise
        print("note: the client's transport closed on a late answer to the cancelled call")
    print("client: all checks passed")
