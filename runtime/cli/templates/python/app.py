"""{{name}}: a toolcell tool in Python, built against wit/tool.wit with componentize-py.

toolcell checks the arguments against SCHEMA before call() runs, gives each call a fresh
instance, and grants nothing this tool does not declare in `capabilities`.
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import tool
from wit_world.imports import types

# The arguments, as a JSON Schema: what the model is told, and what toolcell enforces.
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "description": "Who to greet."}},
    "required": ["name"],
    "additionalProperties": False,
}


class Tool(exports.Tool):
    def describe(self) -> tool.Info:
        return tool.Info(
            name="{{name}}",
            description="Greets someone by name.",
            input_schema=json.dumps(SCHEMA),
            read_only=True,
            concurrency_safe=True,
            capabilities=[],
            output_schema=None,
            client_needs=[],
        )

    def call(self, arguments: str) -> list[types.Part]:
        """The result's parts, or raise Err(types.ToolError_InvalidInput(...)) (or _NotFound,
        _Denied, _Failed) for a failure the model reads. Any other exception is a crash:
        toolcell reports it as a trap (and shows what it wrote to stderr).

        A part is text (types.Part_Text), an image or audio (types.Part_Image(types.Media(
        mime_type="image/png", data=png_bytes))), a resource carried whole
        (types.Part_Resource(types.EmbeddedResource(...))) or a link to one
        (types.Part_ResourceLink(...)); see wit/tool.wit."""
        name = json.loads(arguments)["name"].strip()
        if not name:
            raise Err(types.ToolError_InvalidInput("the name is blank"))
        return [types.Part_Text(f"Hello, {name}!")]
