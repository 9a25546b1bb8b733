"""{{name}}: a toolcell tool in Python, built against wit/tool.wit with componentize-py.

toolcell checks the arguments against SCHEMA before call() runs, gives each call a fresh
instance, and grants nothing this tool does not declare in `capabilities`.
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import tool

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
        )

    def call(self, arguments: str) -> list[tool.Part]:
        """The result's parts, or raise Err(tool.ToolError_InvalidInput(...)) (or _NotFound,
        _Denied, _Failed) for a failure the model reads. Any other exception is a crash:
        toolcell reports it as a trap (and shows what it wrote to stderr).

        A part is text (tool.Part_Text), an image or audio (tool.Part_Image(tool.Media(
        mime_type="image/png", data=png_bytes))), a resource carried whole
        (tool.Part_Resource(tool.EmbeddedResource(...))) or a link to one
        (tool.Part_ResourceLink(...)); see wit/tool.wit."""
        name = json.loads(arguments)["name"].strip()
        if not name:
            raise Err(tool.ToolError_InvalidInput("the name is blank"))
        return [tool.Part_Text(f"Hello, {name}!")]
