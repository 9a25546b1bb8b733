"""A real MCP client (the `mcp` package from PyPI) reading results of parts from toolcell.

Usage: parts.py stdio MODE TOOLCELL TOOLS_DIR
       parts.py http MODE URL
(MODE: "auto" or "legacy")

The tools directory holds `painter` and the conformance fixtures `test_image_content`,
`test_audio_content` and `test_embedded_resource`. Each part must arrive as the content block
MCP defines, its bytes intact; a part that breaks the host's rules must be an error result;
a misspelt tool must be named with the one it meant. Any failed expectation exits non-zero.
"""

import base64
import os
import sys

import anyio
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from checks import expect


async def checks(client):
    result = await client.call_tool("painter", {"make": "honest"})
    kinds = [block.type for block in result.content]
    expect(not result.is_error, "painter answers")
    expect(
        kinds == ["text", "image", "audio", "resource", "resource", "resource_link"],
        f"one block per part, in order: {kinds}",
    )
    text, image, audio, notes, blob, link = result.content
    expect(text.text == "a picture:", "the text block is the text part")
    png = base64.b64decode(image.data, validate=True)
    expect(image.mime_type == "image/png" and png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) == 70,
           "the image is base64 of the 70 bytes of the PNG")
    wav = base64.b64decode(audio.data, validate=True)
    expect(audio.mime_type == "audio/wav" and wav.startswith(b"RIFF") and wav[8:12] == b"WAVE",
           "the audio is base64 of the WAV")
    expect(str(notes.resource.uri) == "test://notes" and notes.resource.mime_type == "text/markdown"
           and notes.resource.text == "# notes", "a text resource is embedded whole")
    expect(base64.b64decode(blob.resource.blob) == bytes([0, 1, 2, 255]),
           "a binary resource is embedded as base64")
    expect(str(link.uri) == "file:///report.pdf" and link.name == "report"
           and link.description == "the full report" and link.mime_type == "application/pdf",
           "a link carries its uri, name, description and type")

    for name, kind in [("test_image_content", "image"), ("test_audio_content", "audio"),
                       ("test_embedded_resource", "resource")]:
        result = await client.call_tool(name, {})
        expect(not result.is_error and [block.type for block in result.content] == [kind],
               f"{name} answers with one {kind} block")

    result = await client.call_tool("painter", {"make": "liar"})
    said = "".join(block.text for block in result.content if block.type == "text")
    expect(result.is_error and "are not image/png" in said,
           f"HTML called a PNG is an error result, never an image: {said!r}")
    expect(all(block.type == "text" for block in result.content), "and nothing but its text is sent")

    result = await client.call_tool("call_tool", {"name": "paintr", "arguments": {}})
    said = "".join(block.text for block in result.content if block.type == "text")
    expect('No tool named "paintr"; did you mean painter?' in said, f"call_tool names the tool meant: {said!r}")
    try:
        await client.call_tool("paintr", {"make": "honest"})
        expect(False, "a misspelt tool is a protocol error")
    except MCPError as error:
        expect(error.code == -32602 and "did you mean painter?" in str(error),
               f"a misspelt tool is -32602 naming the tool meant: {error}")


async def main(transport, mode, *rest):
    if transport == "stdio":
        toolcell, tools_dir = rest
        server = StdioServerParameters(
            command=toolcell,
            args=["serve", "--tools", tools_dir],
            env={name: value for name, value in os.environ.items() if name.startswith("TOOLCELL_")},
        )
        async with Client(server, mode=mode, read_timeout_seconds=30) as client:
            await checks(client)
    else:
        (url,) = rest
        http = create_mcp_http_client()
        async with http, Client(streamable_http_client(url, http_client=http), mode=mode,
                                read_timeout_seconds=30) as client:
            await checks(client)


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:])
    print("client: all checks passed")
