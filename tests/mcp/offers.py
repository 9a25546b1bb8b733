"""A component's prompts, resources and completion reach a real MCP client (the `mcp` package
from PyPI) over stdio, in both eras: listed, answered from what was asked, and refused in the
protocol's words.

Usage:
  offers.py TOOLCELL TOOLS

TOOLS holds `offers_fixture` (tests/guests/offers_fixture). Any failed expectation exits
non-zero.
"""

import base64
import os
import sys

import anyio
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitResult, PromptReference, ResourceTemplateReference
from checks import expect


def stdio_server(toolcell, tools):
    env = {name: value for name, value in os.environ.items() if name.startswith("TOOLCELL_")}
    return StdioServerParameters(command=toolcell, args=["--tools", tools, "serve"], env=env)


class Person:
    """Answers the host's approval question \"once\", and the prompt's question with a context."""

    def __init__(self):
        self.asked = []

    async def on_elicit(self, context, params):
        self.asked.append(params.message)
        if params.message.startswith("toolcell:"):
            return ElicitResult(action="accept", content={"decision": "once"})
        return ElicitResult(action="accept", content={"context": "the garden"})


async def check(client, person, era):
    prompts = await client.list_prompts()
    names = sorted(prompt.name for prompt in prompts.prompts)
    expect("test_prompt_with_arguments" in names and len(names) == 5, f"{era}: five prompts listed: {names}")
    with_arguments = next(p for p in prompts.prompts if p.name == "test_prompt_with_arguments")
    expect([(a.name, a.required) for a in with_arguments.arguments] == [("arg1", True), ("arg2", True)],
           f"{era}: its arguments, both required")

    got = await client.get_prompt("test_prompt_with_arguments", {"arg1": "OAK", "arg2": "ELM"})
    text = got.messages[0].content.text
    expect(got.messages[0].role == "user" and "OAK" in text and "ELM" in text, f"{era}: filled from its arguments: {text!r}")
    # A prompt that asks the person (gated by default: the host asks about it first), its
    # question labelled as the prompt's; the answer fills the prompt.
    person.asked.clear()
    asked = await client.get_prompt("test_input_required_result_prompt")
    text = asked.messages[0].content.text
    expect("the garden" in text, f"{era}: the prompt was made from the person's answer: {text!r}")
    expect(len(person.asked) == 2 and person.asked[0].startswith("toolcell:")
           and person.asked[1] == "[prompt test_input_required_result_prompt] What context should the prompt use?",
           f"{era}: the host asked first, then the prompt, labelled: {person.asked}")
    image = await client.get_prompt("test_prompt_with_image")
    expect(image.messages[0].content.type == "image" and base64.b64decode(image.messages[0].content.data)[:4] == b"\x89PNG",
           f"{era}: an image message")

    try:
        await client.get_prompt("test_prompt_with_arguments", {"arg1": "only one"})
        expect(False, f"{era}: a missing required argument is refused")
    except MCPError as error:
        expect(error.error.code == -32602, f"{era}: a missing required argument is -32602: {error}")

    resources = await client.list_resources()
    uris = sorted(str(r.uri) for r in resources.resources)
    expect(uris == ["test://static-binary", "test://static-text", "test://watched-resource"], f"{era}: three resources: {uris}")
    templates = await client.list_resource_templates()
    expect([t.uri_template for t in templates.resource_templates] == ["test://template/{id}/data"], f"{era}: one template")

    binary = await client.read_resource("test://static-binary")
    expect(base64.b64decode(binary.contents[0].blob)[:4] == b"\x89PNG", f"{era}: a blob read")
    templated = await client.read_resource("test://template/77/data")
    expect("77" in templated.contents[0].text, f"{era}: the template's variable reached the component")
    try:
        await client.read_resource("test://nowhere")
        expect(False, f"{era}: a resource not found is refused")
    except MCPError as error:
        expect(error.error.code == -32602 and (error.error.data or {}).get("uri") == "test://nowhere",
               f"{era}: not found is -32602 with data.uri: {error.error}")

    completed = await client.complete(PromptReference(name="test_prompt_with_arguments"), {"name": "arg2", "value": "va"})
    expect(completed.completion.values == ["value", "valid"], f"{era}: completed from the component: {completed.completion}")
    by_template = await client.complete(ResourceTemplateReference(uri="test://template/{id}/data"), {"name": "id", "value": "4"})
    expect(by_template.completion.values == ["41", "42", "43"], f"{era}: a template's variable completed")


async def main(toolcell, tools):
    for mode, era in [("auto", "stdio 2026-07-28"), ("legacy", "stdio 2025-11-25")]:
        person = Person()
        async with Client(stdio_server(toolcell, tools), mode=mode, read_timeout_seconds=30,
                          elicitation_callback=person.on_elicit) as client:
            await check(client, person, era)
            if mode == "legacy":
                await client.subscribe_resource("test://watched-resource")
                expect(True, f"{era}: a subscription to a served resource is accepted")


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:3])
    print("client: all checks passed")
