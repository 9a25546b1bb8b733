// {{name}}: a toolcell tool in JavaScript, built against wit/tool.wit with componentize-js.
//
// toolcell checks the arguments against SCHEMA before call() runs, gives each call a fresh
// instance, and grants nothing this tool does not declare in `capabilities`.
//
// The export is an object named after the WIT interface with one function per WIT function;
// WIT records are objects with camelCase fields.

// The arguments, as a JSON Schema: what the model is told, and what toolcell enforces.
const SCHEMA = {
  type: "object",
  properties: { name: { type: "string", description: "Who to greet." } },
  required: ["name"],
  additionalProperties: false,
};

/** A failure the model reads: `tag` is a tool-error case ("invalid-input", "not-found",
 * "denied" or "failed"). Throw it from call(); anything else thrown is a crash, which
 * toolcell reports as a trap. */
function toolError(tag, message) {
  const error = new Error(message);
  error.payload = { tag, val: message };
  return error;
}

export const tool = {
  describe() {
    return {
      name: "{{name}}",
      description: "Greets someone by name.",
      inputSchema: JSON.stringify(SCHEMA),
      readOnly: true,
      concurrencySafe: true,
      capabilities: [],
      // A JSON Schema (object) for a JSON result, as text, checked by toolcell on every call;
      // undefined for a plain-text result.
      outputSchema: undefined,
      clientNeeds: [],
    };
  },

  // The result's parts: text ({ tag: "text", val }), an image or audio ({ tag: "image",
  // val: { mimeType: "image/png", data: Uint8Array } }), a resource carried whole
  // ({ tag: "resource", val: { uri, mimeType, contents: { tag: "text", val } } }) or a link to
  // one ({ tag: "resource-link", val: {...} }); see wit/tool.wit.
  call(argumentsText) {
    const name = JSON.parse(argumentsText).name.trim();
    if (name === "") throw toolError("invalid-input", "the name is blank");
    return [{ tag: "text", val: `Hello, ${name}!` }];
  },
};
