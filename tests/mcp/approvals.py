"""A person approves gated calls from a real MCP client (the `mcp` package from PyPI).

Usage:
  approvals.py stdio TOOLCELL POLICY WORKSPACE MODE
  approvals.py http URL TOKEN_A WORKSPACE_A TOKEN_B WORKSPACE_B

MODE is "auto" (the stateless 2026-07-28 era: multi-round-trip requests) or "legacy" (the
initialize handshake: `elicitation/create` over the session). The policy gates write_file with a
short deadline (DEADLINE_S). The elicitation callback answers from a script the test sets per
call; every check reads the workspace itself. Any failed expectation exits non-zero.
"""

import os
import sys

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import ElicitResult, InputRequiredResult
from checks import expect, text_of

# The policy's timeout_ms for write_file, in seconds: an answer later than this is no answer.
DEADLINE_S = 1.5


class Person:
    """The person at the client: answers each question from `plan`, and remembers them."""

    def __init__(self):
        self.plan = []
        self.asked = []

    async def callback(self, context, params):
        self.asked.append(params.message)
        action, decision, delay = self.plan.pop(0) if self.plan else ("decline", None, 0)
        if delay:
            await anyio.sleep(delay)
        content = {"decision": decision} if decision is not None else None
        return ElicitResult(action=action, content=content)


def written(workspace, name):
    path = os.path.join(workspace, name)
    if not os.path.exists(path):
        return None
    with open(path) as file:
        return file.read()


async def write(client, name, content):
    return await client.call_tool("write_file", {"path": name, "content": content})


async def the_answers(client, person, workspace, where):
    """Once, deny, decline, cancel, always, and an answer after the deadline."""
    person.plan = [("accept", "once", 0)]
    result = await write(client, "once.txt", "SECRET-once")
    expect(not result.is_error and written(workspace, "once.txt") == "SECRET-once", f"{where}: approved once, the file is written")
    expect(len(person.asked) == 1, f"{where}: the person was asked once ({len(person.asked)})")
    question = person.asked[-1]
    expect('write_file wants filesystem.write on "once.txt"' in question, f"{where}: the question names tool, capability and path: {question!r}")
    expect("SECRET" not in question, f"{where}: the question carries no argument contents")

    person.plan = [("accept", "deny", 0)]
    result = await write(client, "denied.txt", "x")
    expect(result.is_error and written(workspace, "denied.txt") is None, f"{where}: denied, nothing written: {text_of(result)!r}")
    expect("denied" in text_of(result), f"{where}: the model reads that a person denied it")

    person.plan = [("decline", None, 0)]
    result = await write(client, "declined.txt", "x")
    expect(result.is_error and written(workspace, "declined.txt") is None, f"{where}: declined, nothing written")

    person.plan = [("cancel", None, 0)]
    result = await write(client, "cancelled.txt", "x")
    expect(result.is_error and written(workspace, "cancelled.txt") is None, f"{where}: dismissed, nothing written")
    expect("none came" in text_of(result), f"{where}: a dismissed question is no answer: {text_of(result)!r}")

    asked = len(person.asked)
    person.plan = [("accept", "always", 0)]
    result = await write(client, "always.txt", "first")
    expect(not result.is_error and written(workspace, "always.txt") == "first", f"{where}: approved always, written")
    result = await write(client, "always.txt", "second")
    expect(not result.is_error and written(workspace, "always.txt") == "second", f"{where}: the second call runs")
    expect(len(person.asked) == asked + 1, f"{where}: without asking again ({len(person.asked) - asked} questions)")
    expect(os.path.exists(os.path.join(workspace, ".toolcell/permissions.toml")), f"{where}: the rule is saved in the workspace")

    person.plan = [("accept", "once", DEADLINE_S + 1.0)]
    result = await write(client, "late.txt", "x")
    expect(result.is_error and written(workspace, "late.txt") is None, f"{where}: an answer after the deadline runs nothing: {text_of(result)!r}")


async def stdio(toolcell, policy, workspace, mode):
    env = {name: value for name, value in os.environ.items() if name.startswith("TOOLCELL_")}
    server = StdioServerParameters(
        command=toolcell,
        args=["--policy", policy, "--workspace", workspace, "serve"],
        env=env,
    )
    person = Person()
    async with Client(server, mode=mode, read_timeout_seconds=30, elicitation_callback=person.callback) as client:
        print(f"connected ({mode}), protocol {client.session.protocol_version}")
        await the_answers(client, person, workspace, f"stdio {mode}")

    async with Client(server, mode=mode, read_timeout_seconds=30) as client:
        result = await write(client, "unasked.txt", "x")
        expect(result.is_error and written(workspace, "unasked.txt") is None, f"stdio {mode}: a client that cannot be asked gets nothing written")
        expect("none can be asked here" in text_of(result), f"stdio {mode}: and approval_required, as before: {text_of(result)!r}")


def http_client(url, token, **options):
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return http, Client(streamable_http_client(url, http_client=http), read_timeout_seconds=30, **options)


async def http(url, token_a, workspace_a, token_b, workspace_b):
    person = Person()
    http_a, client = http_client(url, token_a, mode="auto", elicitation_callback=person.callback)
    async with http_a, client:
        print(f"connected over HTTP, protocol {client.session.protocol_version}")
        await the_answers(client, person, workspace_a, "http")

        # An answer counts only from the client whose call asked: team-b sends team-a's handle
        # back with an approval, and is asked afresh; nothing is written anywhere.
        first = await client.session.call_tool("write_file", {"path": "shared.txt", "content": "a"}, allow_input_required=True)
        expect(isinstance(first, InputRequiredResult) and first.request_state, "http: the first round asks (input_required)")
        key = next(iter(first.input_requests))
        approve = {key: ElicitResult(action="accept", content={"decision": "once"})}
        http_b, other = http_client(url, token_b, mode="auto", elicitation_callback=Person().callback)
        async with http_b, other:
            stolen = await other.session.call_tool(
                "write_file", {"path": "shared.txt", "content": "b"},
                input_responses=approve, request_state=first.request_state, allow_input_required=True,
            )
            expect(isinstance(stolen, InputRequiredResult) and stolen.request_state != first.request_state,
                   "http: another tenant's answer with team-a's handle is ignored, and it is asked itself")
        expect(written(workspace_a, "shared.txt") is None and written(workspace_b, "shared.txt") is None, "http: nothing written by the foreign answer")
        own = await client.session.call_tool(
            "write_file", {"path": "shared.txt", "content": "a"},
            input_responses=approve, request_state=first.request_state, allow_input_required=True,
        )
        expect(not isinstance(own, InputRequiredResult) and not own.is_error and written(workspace_a, "shared.txt") == "a",
               "http: team-a's own answer still counts")
        again = await client.session.call_tool(
            "write_file", {"path": "shared.txt", "content": "replayed"},
            input_responses=approve, request_state=first.request_state, allow_input_required=True,
        )
        expect(isinstance(again, InputRequiredResult) and written(workspace_a, "shared.txt") == "a", "http: a handle counts once")

    # The initialize era over HTTP: the person is asked through the session the server gave
    # (its id carries what the client declared), on the call's stream.
    http_l, legacy = http_client(url, token_a, mode="legacy", elicitation_callback=person.callback)
    async with http_l, legacy:
        asked = len(person.asked)
        person.plan = [("accept", "once", 0)]
        result = await write(legacy, "legacy.txt", "x")
        expect(not result.is_error and written(workspace_a, "legacy.txt") == "x" and len(person.asked) == asked + 1,
               f"http legacy: the person was asked on the call's stream and said once: {text_of(result)!r}")
        person.plan = [("accept", "deny", 0)]
        result = await write(legacy, "legacy-denied.txt", "x")
        expect(result.is_error and written(workspace_a, "legacy-denied.txt") is None,
               f"http legacy: denied, nothing written: {text_of(result)!r}")
    # A client of that era that declares no elicitation cannot be asked: approval_required.
    http_q, quiet = http_client(url, token_a, mode="legacy")
    async with http_q, quiet:
        result = await write(quiet, "quiet.txt", "x")
        expect(result.is_error and "none can be asked here" in text_of(result) and written(workspace_a, "quiet.txt") is None,
               f"http legacy without elicitation: approval_required, nothing written: {text_of(result)!r}")


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        anyio.run(stdio, *sys.argv[2:6])
    else:
        anyio.run(http, *sys.argv[2:7])
    print("client: all checks passed")
