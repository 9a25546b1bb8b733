"""Tools talk to a real MCP client (the `mcp` package from PyPI) over HTTP, in both eras, through
two replicas that share a store, the client's requests dealt to them in turn as a round-robin
balancer deals them: a question for the model, a question for the person behind the host's own
approval question, log messages and progress; a question the policy denies.

Usage:
  talking_replicas.py URL_A URL_B TOKEN

Both replicas serve `talker` (tests/guests/talker; its policy denies `client.sample` and leaves
`client.elicit` at its default, gated) and `test_sampling` (allowed to sample). In the
2025-11-25 era a question goes out on the call's stream and its answer is a POST of its own,
which the balancer may hand to the other replica; in 2026-07-28 the call ends with the
question and the client sends it again with the answer, to whichever replica. Any failed
expectation exits non-zero.
"""

import json
import sys

import anyio
import httpx2 as httpx
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CreateMessageResult, ElicitResult, TextContent
from checks import expect, text_of


class RoundRobin(httpx.AsyncBaseTransport):
    """Deals requests to the replicas in turn, and notes where each call and each answer to a
    server's question went."""

    def __init__(self, urls):
        self.ports = [httpx.URL(url).port for url in urls]
        self.turn = 0
        self.inner = httpx.AsyncHTTPTransport()
        self.calls = []
        self.answers = []

    async def handle_async_request(self, request):
        replica = self.turn % len(self.ports)
        self.turn += 1
        try:
            message = json.loads(request.content or b"null")
        except (ValueError, httpx.RequestNotRead):
            message = None
        if isinstance(message, dict):
            if message.get("method") == "tools/call":
                self.calls.append(replica)
            if "method" not in message and str(message.get("id", "")).startswith("tc-q-"):
                self.answers.append(replica)
        request.url = request.url.copy_with(port=self.ports[replica])
        return await self.inner.handle_async_request(request)

    async def aclose(self):
        await self.inner.aclose()


class Person:
    """The client's model and person: what they were asked, and what they say."""

    def __init__(self):
        self.logs = []
        self.progress = []
        self.sampled = []
        self.elicited = []
        self.says = "once"

    async def on_log(self, params):
        self.logs.append(params.data)

    async def on_progress(self, progress, total, message):
        self.progress.append(progress)

    async def on_sample(self, context, params):
        self.sampled.append(params)
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text="the model's words"),
                                   model="test-model", stop_reason="endTurn")

    async def on_elicit(self, context, params):
        self.elicited.append(params.message)
        if params.message.startswith("[tool "):
            return ElicitResult(action="accept", content={"name": "Alice"})
        return ElicitResult(action="accept", content={"decision": self.says})


async def call(client, person, tool, arguments):
    result = await client.call_tool(tool, arguments, progress_callback=person.on_progress)
    expect(not result.is_error, f"{tool} answered: {text_of(result)[:300]!r}")
    return text_of(result)


async def era(urls, token, mode):
    where = f"http {mode} over two replicas"
    dealer = RoundRobin(urls)
    http = httpx.AsyncClient(transport=dealer, headers={"Authorization": f"Bearer {token}"},
                             timeout=httpx.Timeout(30, read=120), follow_redirects=True)
    person = Person()
    async with http, Client(streamable_http_client(urls[0], http_client=http), mode=mode,
                            read_timeout_seconds=60, log_level="info" if mode == "auto" else None,
                            logging_callback=person.on_log, sampling_callback=person.on_sample,
                            elicitation_callback=person.on_elicit) as client:
        # A question for the model, answered at whichever replica the answer reaches.
        said = await call(client, person, "test_sampling", {"prompt": "Summarise this."})
        expect(said == "LLM response: the model's words", f"{where}: the model's answer came back: {said!r}")
        expect(len(person.sampled) == 1 and person.sampled[0].max_tokens == 100,
               f"{where}: the model was asked once, for at most 100 tokens: {person.sampled}")
        if mode == "legacy":
            expect(any(answer != dealer.calls[-1] for answer in dealer.answers),
                   f"{where}: the answer went to the other replica than the call's "
                   f"(calls {dealer.calls}, answers {dealer.answers})")

        # Gated by default: the host asks the person about the tool's question first, then the
        # tool asks its own, labelled with its name; its log messages and progress arrive.
        person.elicited.clear()
        said = json.loads(await call(client, person, "talker", {
            "logs": [{"level": "info", "message": "hello"}],
            "progress": [{"value": 1, "total": 2}, {"value": 2, "total": 2}],
            "ask": [{"key": "person", "elicit": "Your name?"}],
        }))
        expect(len(person.elicited) == 2 and "client.elicit" in person.elicited[0]
               and "talker" in person.elicited[0], f"{where}: the host asked first: {person.elicited}")
        expect(person.elicited[1] == "[tool talker] Your name?", f"{where}: then the tool, labelled: {person.elicited}")
        expect(said.get("answers", [{}])[0].get("content") == {"name": "Alice"},
               f"{where}: the tool got the person's answer: {said}")
        expect("hello" in person.logs, f"{where}: the tool's log message arrived: {person.logs}")
        expect(person.progress[-2:] == [1, 2], f"{where}: its progress arrived: {person.progress}")

        # Denied by the policy: the tool is told so (a typed error), and nothing is asked.
        asked = len(person.sampled)
        said = json.loads(await call(client, person, "talker", {"ask": [{"key": "model", "sample": "x"}]}))
        expect(said.get("ask_error", {}).get("kind") == "denied" and len(person.sampled) == asked,
               f"{where}: sampling denied by policy is a typed error, nothing sent: {said}")

        # The person says no: the tool is told denied, and its question is never shown.
        person.elicited.clear()
        person.says = "deny"
        said = json.loads(await call(client, person, "talker", {"ask": [{"key": "p", "elicit": "Again?"}]}))
        expect(said.get("ask_error", {}).get("kind") == "denied" and len(person.elicited) == 1,
               f"{where}: refused by the person, the tool is told denied: {said} {person.elicited}")


async def main(url_a, url_b, token):
    for mode in ["legacy", "auto"]:
        await era([url_a, url_b], token, mode)


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:4])
    print("client: all checks passed")
