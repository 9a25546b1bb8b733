// json_pick: values out of a JSON document, by JSON Pointer (RFC 6901).
//
// A toolcell tool written in JavaScript, built against wit/tool.wit with componentize-js
// (StarlingMonkey) or componentize-qjs --sync (QuickJS); the same source serves both. It reads
// only its arguments: no files, network or environment.
//
// The export is an object named after the WIT interface (`tool`) with one function per WIT
// function. WIT records are objects with camelCase fields; an enum case is its name as a
// string; a `result` error is thrown, as an Error whose `payload` is the `tool-error` variant
// ({ tag, val }). Anything else thrown is a bug in the tool: the call traps, and toolcell
// reports the crash with what the guest printed.

// The result: the value found at each pointer, keyed by the pointer.
const OUTPUT_SCHEMA = {
  type: "object",
  additionalProperties: true,
};

const SCHEMA = {
  type: "object",
  properties: {
    json: { type: "string", description: "The JSON document, as text." },
    pointers: {
      type: "array",
      items: { type: "string", pattern: "^(/.*)?$" },
      minItems: 1,
      description: 'JSON Pointers (RFC 6901) to pick, such as "/items/0/name"; "" is the whole document.',
    },
  },
  required: ["json", "pointers"],
  additionalProperties: false,
};

/** A failure the model should read: `tag` is a `tool-error` case. */
function toolError(tag, message) {
  const error = new Error(message);
  error.payload = { tag, val: message };
  return error;
}

/** The value at `pointer` in `document`, or a not-found tool error. */
function pick(document, pointer) {
  let value = document;
  if (pointer === "") return value;
  for (const raw of pointer.slice(1).split("/")) {
    const token = raw.replaceAll("~1", "/").replaceAll("~0", "~");
    const container = value !== null && typeof value === "object";
    const present = Array.isArray(value)
      ? /^(0|[1-9][0-9]*)$/.test(token) && Number(token) < value.length
      : container && Object.hasOwn(value, token);
    if (!present) throw toolError("not-found", `nothing at ${JSON.stringify(pointer)}`);
    value = value[token];
  }
  return value;
}

export const tool = {
  describe() {
    return {
      name: "json_pick",
      description:
        "Picks values out of a JSON document by JSON Pointer and returns them as one JSON object keyed by pointer.",
      inputSchema: JSON.stringify(SCHEMA),
      readOnly: true,
      concurrencySafe: true,
      capabilities: [],
      // The result is one object keyed by pointer: toolcell checks it, and MCP clients get it
      // as structuredContent.
      outputSchema: JSON.stringify(OUTPUT_SCHEMA),
      clientNeeds: [],
    };
  },

  call(argumentsText) {
    // toolcell has already checked the arguments against SCHEMA.
    const args = JSON.parse(argumentsText);
    let document;
    try {
      document = JSON.parse(args.json);
    } catch (error) {
      throw toolError("invalid-input", `json is not JSON: ${error.message}`);
    }
    const picked = {};
    for (const pointer of args.pointers) picked[pointer] = pick(document, pointer);
    return [{ tag: "text", val: JSON.stringify(picked) }];
  },
};
