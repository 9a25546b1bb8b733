"""A Python tool written against toolcell:tool@0.1.0 and rebuilt against today's wit/: its
describe() builds an `Info` without `output_schema` (added in 0.2.0), so Python raises a
TypeError, which the guest can only turn into a trap. The host must refuse the component and
show the person this exception, not just the trap.
"""

import json

from wit_world import exports
from wit_world.exports import tool
from wit_world.imports import types


class Tool(exports.Tool):
    def describe(self) -> tool.Info:
        return tool.Info(
            name="old_info",
            description="Describes itself as 0.1.0 did.",
            input_schema=json.dumps({"type": "object"}),
            read_only=True,
            concurrency_safe=True,
            capabilities=[],
        )

    def call(self, arguments: str) -> list[types.Part]:
        return [types.Part_Text(arguments)]
