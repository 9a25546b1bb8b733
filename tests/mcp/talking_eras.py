"""A tool's log messages and progress reach a real MCP client (the `mcp` package from PyPI) in
both eras, over stdio and HTTP; its questions are `input_required` rounds over 2026-07-28, and
requests on the call's stream over HTTP in the 2025-11-25 era, whose answers the server routes
back to the call by the session id it gave the client.

Usage:
  talking_eras.py TOOLCELL TOOLS POLICY URL

`talker` (tests/guests/talker) logs, reports progress and asks as its arguments say. POLICY
allows it every way; URL is `toolcell serve --http` with the same tools and policy. Any failed
expectation exits non-zero.
"""

import json
import os
import sys

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import CreateMessageResult, TextContent
from checks import expect, text_of


class Seen:
    def __init__(self):
        self.logs = []
        self.progress = []

    async def on_log(self, params):
        self.logs.append((params.level, params.data, params.logger))

    async def on_progress(self, progress, total, message):
        self.progress.append(progress)

    async def on_sample(self, context, params):
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text="words"), model="m")


ARGUMENTS = {
    "logs": [{"level": "info", "message": "hello"}, {"level": "warning", "message": "careful"}],
    "progress": [{"value": 1, "total": 3}, {"value": 2, "total": 3}, {"value": 3, "total": 3}],
    "ask": [{"key": "model", "sample": "x"}],
}


async def check(client, seen, where, wants_logs, rounds):
    """One call of `talker`. Over 2026-07-28 its question is an `input_required` round: the
    client answers it (its sampling callback) and sends the call again, which runs the tool
    again from the start, so its log messages and progress come once per round (each on its
    own request's stream). Over HTTP in the 2025-11-25 era the question is a request on the
    call's stream, answered once."""
    result = await client.call_tool("talker", ARGUMENTS, progress_callback=seen.on_progress)
    expect(not result.is_error, f"{where}: answered: {text_of(result)[:200]!r}")
    said = json.loads(text_of(result))
    runs = 2 if rounds else 1
    if wants_logs:
        expect([data for _, data, _ in seen.logs] == ["hello", "careful"] * runs,
               f"{where}: both log messages arrived, once a run: {seen.logs}")
        expect(all(logger == "talker" for _, _, logger in seen.logs), f"{where}: from the tool's logger")
    else:
        expect(seen.logs == [], f"{where}: no log messages for a request that asked for none: {seen.logs}")
    expect(seen.progress == [1, 2, 3] * runs, f"{where}: progress 1, 2, 3, once a run: {seen.progress}")
    answers = said.get("answers") or [{}]
    expect(answers[0].get("text") == "words", f"{where}: the question came back answered: {said}")


def stdio_server(toolcell, tools, policy):
    env = {name: value for name, value in os.environ.items() if name.startswith("TOOLCELL_")}
    return StdioServerParameters(command=toolcell, args=["--tools", tools, "--policy", policy, "serve"], env=env)


async def main(toolcell, tools, policy, url):
    # stdio, 2026-07-28: log messages only for a request that names a level.
    for level, wants in [(None, False), ("info", True)]:
        seen = Seen()
        async with Client(stdio_server(toolcell, tools, policy), mode="auto", read_timeout_seconds=30,
                          logging_callback=seen.on_log, sampling_callback=seen.on_sample, log_level=level) as client:
            await check(client, seen, f"stdio 2026 (logLevel {level})", wants, rounds=True)

    # HTTP, both eras.
    for mode, level, wants in [("auto", None, False), ("auto", "info", True), ("legacy", None, True)]:
        seen = Seen()
        http = create_mcp_http_client()
        async with http, Client(streamable_http_client(url, http_client=http), mode=mode, read_timeout_seconds=30,
                                logging_callback=seen.on_log, sampling_callback=seen.on_sample, log_level=level) as client:
            await check(client, seen, f"http {mode} (logLevel {level})", wants, rounds=mode == "auto")

    # A 2025-11-25 session's level is kept for its later calls (by its session id)...
    seen = Seen()
    own_http = create_mcp_http_client()
    async with own_http, Client(streamable_http_client(url, http_client=own_http), mode="legacy",
                                read_timeout_seconds=30, logging_callback=seen.on_log) as own:
        await own.set_logging_level("warning")
        result = await own.call_tool("talker", {"logs": [{"level": "info", "message": "i"},
                                                         {"level": "warning", "message": "w"}]})
        expect(not result.is_error, "http legacy: answered after its session set warning")
        expect([data for _, data, _ in seen.logs] == ["w"],
               f"http legacy: the session's own level held for its next call: {seen.logs}")
    # ...and one client's level is not another's: a level set by one session must not reach
    # another session's calls.
    setter_http, other_http = create_mcp_http_client(), create_mcp_http_client()
    async with setter_http, Client(streamable_http_client(url, http_client=setter_http), mode="legacy",
                                   read_timeout_seconds=30) as setter:
        await setter.set_logging_level("debug")
        seen = Seen()
        async with other_http, Client(streamable_http_client(url, http_client=other_http), mode="legacy",
                                      read_timeout_seconds=30, logging_callback=seen.on_log) as other:
            result = await other.call_tool("talker", {"logs": [{"level": "debug", "message": "d"},
                                                               {"level": "info", "message": "i"}]})
            expect(not result.is_error, "http legacy: answered after another client set debug")
            expect([data for _, data, _ in seen.logs] == ["i"],
                   f"http legacy: another client's setLevel debug did not reach this call: {seen.logs}")


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:5])
    print("client: all checks passed")
