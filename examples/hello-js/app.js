// hello: the smallest plugin in JavaScript, the same tool as examples/hello.
//
// Build it into a component and try it (componentize-js from npm):
//
//   componentize-js app.js --wit wit --world-name plugin -d http fetch-event -o hello.wasm
//   host install ./hello.wasm
//   host call hello '{"name": "Ada"}'
//
// It needs no capability, so the default policy (deny everything) serves it
// as it is; grants go under [plugins.hello] (the file's name).

// --- The host's plugin world for JavaScript: declare tools with `tool`. ---

/** Throw to answer a call with a tool error (MCP `isError: true`). */
export class ToolFailure extends Error {
  constructor(code, message, { retryable = false, details } = {}) {
    super(message);
    Object.assign(this, { code, retryable, details });
  }
}

const declared = [];

/**
 * Declare a tool: `handler(args)` gets the arguments (checked by the host
 * against `inputSchema`) and returns a string (text) or a JSON value
 * (structured content, and its JSON as text).
 */
export function tool({ name, description, inputSchema, outputSchema, title, readOnly = false,
  destructive = false, idempotent = false, openWorld = false }, handler) {
  const annotations = { readOnlyHint: readOnly, destructiveHint: destructive,
    idempotentHint: idempotent, openWorldHint: openWorld, ...(title ? { title } : {}) };
  declared.push({ name, description, inputSchema: { ...inputSchema, "x-annotations": annotations },
    outputSchema, handler });
}

// What a capability's error variant is called here, as a tool error code.
const CODES = { denied: "denied", invalid: "invalid_request", "not-found": "not_found" };

/** The `tools` export the host calls. */
export const tools = {
  list() {
    return declared.map((t) => ({
      name: t.name,
      description: t.description,
      inputSchema: JSON.stringify(t.inputSchema),
      outputSchema: t.outputSchema ? JSON.stringify(t.outputSchema) : undefined,
    }));
  },
  call(name, args) {
    const t = declared.find((d) => d.name === name);
    if (!t) throw { code: "not_found", message: `no tool ${name}`, retryable: false };
    let result;
    try {
      result = t.handler(JSON.parse(args));
    } catch (e) {
      if (e instanceof ToolFailure) {
        throw { code: e.code, message: e.message, retryable: e.retryable,
          details: e.details === undefined ? undefined : JSON.stringify(e.details) };
      }
      // A capability the host refused: an import's error, as its variant.
      const refused = e && e.payload;
      if (refused && refused.tag) {
        throw { code: CODES[refused.tag] ?? "failed", message: String(refused.val), retryable: false };
      }
      throw { code: "failed", message: String(e), retryable: false };
    }
    if (typeof result === "string") return { text: result };
    const text = JSON.stringify(result);
    return { text, structured: t.outputSchema ? text : undefined };
  },
};

// --- The plugin's tools. ---

tool({
  name: "hello",
  description: "Greets someone by name and says how long the greeting is.",
  inputSchema: {
    type: "object",
    properties: {
      name: { type: "string", minLength: 1, maxLength: 100, description: "Whom to greet." },
      shout: { type: "boolean", default: false, description: "Greet loudly (upper case)." },
    },
    required: ["name"],
    additionalProperties: false,
  },
  outputSchema: {
    type: "object",
    properties: { text: { type: "string" }, chars: { type: "integer", minimum: 0 } },
    required: ["text", "chars"],
  },
  readOnly: true,
}, (args) => {
  const name = args.name.trim();
  if (!name) throw new ToolFailure("invalid_request", "name is only spaces: give a name");
  let text = `Hello, ${name}!`;
  if (args.shout) text = text.toUpperCase();
  return { text, chars: [...text].length };
});
