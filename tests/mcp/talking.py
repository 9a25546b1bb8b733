"""A tool talks to a real MCP client (the `mcp` package from PyPI) during its call, over stdio.

Usage:
  talking.py TOOLCELL TOOLS POLICY_OPEN POLICY_DENY AUDIT

The tool is `talker` (tests/guests/talker): it logs, reports progress and asks questions as its
arguments say, and answers with the features it held and what it was told. POLICY_OPEN allows
every way of talking to the client; POLICY_DENY denies sampling and names nothing else, so
elicitation keeps its default (the person is asked first). Any failed expectation exits
non-zero.
"""

import json
import os
import sys

import anyio
from mcp import Client, StdioServerParameters
from mcp_types import CreateMessageResult, ElicitResult, ListRootsResult, Root, TextContent
from checks import expect, text_of

# toolcell::client::MAX_LOGS_PER_CALL
MAX_LOGS_PER_CALL = 256


class Client_:
    """What the client saw: log messages, progress, questions."""

    def __init__(self):
        self.logs = []
        self.progress = []
        self.sampled = []
        self.elicited = []
        self.roots_asked = 0
        self.person_says = "once"

    async def on_log(self, params):
        self.logs.append((params.level, params.data))

    async def on_progress(self, progress, total, message):
        self.progress.append(progress)

    async def on_sample(self, context, params):
        self.sampled.append(params)
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text="the model's words"), model="test-model", stop_reason="endTurn")

    async def on_elicit(self, context, params):
        self.elicited.append(params.message)
        # The host's own approval question (a gated feature) gets a decision; the tool's
        # form gets a name.
        if params.message.startswith("[tool "):
            return ElicitResult(action="accept", content={"name": "Alice"})
        return ElicitResult(action="accept", content={"decision": self.person_says})

    async def on_roots(self, context):
        self.roots_asked += 1
        return ListRootsResult(roots=[Root(uri="file:///project", name="Project")])


def server(toolcell, tools, policy, audit):
    env = {name: value for name, value in os.environ.items() if name.startswith("TOOLCELL_")}
    return StdioServerParameters(
        command=toolcell,
        args=["--tools", tools, "--policy", policy, "--audit", audit, "serve"],
        env=env,
    )


async def talk(client, seen, arguments):
    result = await client.call_tool("talker", arguments, progress_callback=seen.on_progress)
    expect(not result.is_error, f"the call answered: {text_of(result)[:300]!r}")
    return json.loads(text_of(result))


ASK_ALL = [
    {"key": "model", "sample": "Summarise this."},
    {"key": "person", "elicit": "What is your name?"},
    {"key": "where"},
]


async def open_policy(toolcell, tools, policy, audit):
    seen = Client_()
    async with Client(server(toolcell, tools, policy, audit), mode="legacy", read_timeout_seconds=30,
                      logging_callback=seen.on_log, sampling_callback=seen.on_sample,
                      elicitation_callback=seen.on_elicit, list_roots_callback=seen.on_roots) as client:
        said = await talk(client, seen, {
            "logs": [{"level": "info", "message": "hello"}, {"level": "debug", "message": "hidden"}],
            "progress": [{"value": 10}, {"value": 5}, {"value": 20, "total": 100, "message": "a fifth"}],
            "ask": ASK_ALL,
        })
        expect(set(said["features"]) == {"log", "progress", "sample", "elicit", "elicit-url", "list-roots"},
               f"the tool holds what the policy grants and the client offers: {said['features']}")
        expect(("info", "hello") in seen.logs, f"the info message arrived: {seen.logs}")
        expect(all(data != "hidden" for _, data in seen.logs), "a debug message is below the default level")
        expect(seen.progress == [10, 20], f"progress rises, a fall is dropped: {seen.progress}")
        answers = said.get("answers")
        expect(answers is not None, f"the questions were answered: {said}")
        expect(answers[0] == {"model": "test-model", "text": "the model's words"}, f"the model's answer: {answers[0]}")
        expect(answers[1] == {"action": "accept", "content": {"name": "Alice"}}, f"the person's answer: {answers[1]}")
        expect(answers[2] == ["file:///project"], f"the roots: {answers[2]}")
        expect(seen.elicited == ["[tool talker] What is your name?"], f"the person reads the tool's name first: {seen.elicited}")
        request = seen.sampled[0]
        expect(request.max_tokens == 100 and request.messages[0].content.text == "Summarise this.", "the sampling request is the tool's")

        seen.logs.clear()
        await client.set_logging_level("debug")
        await talk(client, seen, {"logs": [{"level": "debug", "message": "now shown"}]})
        expect(("debug", "now shown") in seen.logs, f"after setLevel debug, debug arrives: {seen.logs}")

        seen.logs.clear()
        said = await talk(client, seen, {"logs": [{"level": "info", "message": "flood", "times": 5000}]})
        expect(len(seen.logs) == MAX_LOGS_PER_CALL, f"a flood is cut at {MAX_LOGS_PER_CALL}: {len(seen.logs)}")

        said = await talk(client, seen, {"ask": [{"key": "big", "sample": "x", "pad": 2 * 1024 * 1024}]})
        expect(said.get("ask_error", {}).get("kind") == "over-limit", f"a 2 MB question is refused: {said}")
        said = await talk(client, seen, {"ask": [{"key": "bad key!", "sample": "x"}]})
        expect(said.get("ask_error", {}).get("kind") == "invalid", f"a malformed key is refused: {said}")
        said = await talk(client, seen, {"ask": [{"key": "a", "elicit": "nested?", "schema": {"type": "object", "properties": {"o": {"type": "object"}}}}]})
        expect(said.get("ask_error", {}).get("kind") == "invalid", f"a nested form is refused: {said}")
        asked = len(seen.sampled)
        said = await talk(client, seen, {"ask": [{"key": f"q{n}", "sample": "x"} for n in range(17)]})
        expect(said.get("ask_error", {}).get("kind") == "over-limit" and len(seen.sampled) == asked,
               f"17 questions are refused, none sent: {said}")
        said = await talk(client, seen, {"ask": [{"key": "page", "url": "https://example.invalid/"}]})
        expect(said.get("answers", [{}])[0].get("action") == "accept", f"a URL the policy allows is shown: {said}")
        said = await talk(client, seen, {"ask": [{"key": "page", "url": "http://example.invalid/"}]})
        expect(said.get("ask_error", {}).get("kind") == "invalid", f"a plain-HTTP URL is refused: {said}")

    # A client that offers nothing to ask: the tool is told, never left waiting.
    quiet = Client_()
    async with Client(server(toolcell, tools, policy, audit), mode="legacy", read_timeout_seconds=30,
                      logging_callback=quiet.on_log) as client:
        said = await talk(client, quiet, {"ask": [{"key": "model", "sample": "x"}]})
        expect(said.get("ask_error", {}).get("kind") == "unsupported", f"a client without sampling: unsupported: {said}")
        expect("sample" not in said["features"], "and the tool can see it first")


async def denying_policy(toolcell, tools, policy, audit):
    seen = Client_()
    async with Client(server(toolcell, tools, policy, audit), mode="legacy", read_timeout_seconds=30,
                      logging_callback=seen.on_log, sampling_callback=seen.on_sample,
                      elicitation_callback=seen.on_elicit, list_roots_callback=seen.on_roots) as client:
        said = await talk(client, seen, {"ask": [{"key": "model", "sample": "x"}]})
        expect(said.get("ask_error", {}).get("kind") == "denied" and not seen.sampled,
               f"sampling denied by policy: a typed error, nothing sent: {said}")
        expect("log" in said["features"], "log keeps its default (allowed)")

        # Elicitation keeps its default, gated: the person is asked first, by the host.
        seen.person_says = "once"
        said = await talk(client, seen, {"ask": [{"key": "person", "elicit": "Your name?"}]})
        expect(len(seen.elicited) == 2 and "talker" in seen.elicited[0] and "client.elicit" in seen.elicited[0],
               f"the host asked about client.elicit first: {seen.elicited}")
        expect(seen.elicited[1] == "[tool talker] Your name?", "then the tool's question, labelled")
        expect(said["answers"][0]["content"] == {"name": "Alice"}, f"and the tool got its answer: {said}")

        seen.elicited.clear()
        seen.person_says = "deny"
        said = await talk(client, seen, {"ask": [{"key": "person", "elicit": "Your name?"}]})
        expect(len(seen.elicited) == 1 and said.get("ask_error", {}).get("kind") == "denied",
               f"refused by the person: the tool is told denied, its question never shown: {said} {seen.elicited}")


if __name__ == "__main__":
    toolcell, tools, policy_open, policy_deny, audit = sys.argv[1:6]
    anyio.run(open_policy, toolcell, tools, policy_open, audit)
    anyio.run(denying_policy, toolcell, tools, policy_deny, audit)
    print("client: all checks passed")
