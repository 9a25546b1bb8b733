"""csv_query: rows of CSV text as JSON objects, optionally only some columns and rows.

A toolcell tool written in Python (componentize-py, against wit/tool.wit). It reads only its
arguments: no files, network or environment.
"""

import csv
import io
import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import tool
from wit_world.imports import types

SCHEMA = {
    "type": "object",
    "properties": {
        "csv": {"type": "string", "description": "CSV text; the first row names the columns."},
        "columns": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Only these columns, in this order (default: all).",
        },
        "where": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "description": "Only rows whose named columns equal these values.",
        },
        "limit": {"type": "integer", "minimum": 1, "description": "At most this many rows."},
    },
    "required": ["csv"],
    "additionalProperties": False,
}


class Tool(exports.Tool):
    def describe(self) -> tool.Info:
        return tool.Info(
            name="csv_query",
            description="Reads CSV text and returns its rows as a JSON array of objects, "
            "optionally filtered by column values, projected to some columns and limited.",
            input_schema=json.dumps(SCHEMA),
            read_only=True,
            concurrency_safe=True,
            capabilities=[],
            output_schema=None,
            client_needs=[],
        )

    def call(self, arguments: str) -> list[types.Part]:
        args = json.loads(arguments)
        try:
            reader = csv.DictReader(io.StringIO(args["csv"], newline=""), strict=True)
            header = reader.fieldnames or []
            columns = args.get("columns") or header
            where = args.get("where") or {}
            for name in list(columns) + list(where):
                if name not in header:
                    raise Err(types.ToolError_NotFound(f"no column named {name!r}; the columns are {header}"))
            rows = []
            for row in reader:
                if all(row.get(name) == value for name, value in where.items()):
                    rows.append({name: row.get(name) for name in columns})
                    if len(rows) == args.get("limit", -1):
                        break
        except csv.Error as error:
            raise Err(types.ToolError_InvalidInput(f"the CSV does not parse: {error}"))
        return [types.Part_Text(json.dumps(rows))]
