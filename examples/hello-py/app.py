"""hello: the smallest plugin in Python, the same tool as examples/hello.

Build it into a component and try it (componentize-py from PyPI):

    componentize-py -d wit -w plugin componentize app -o hello.wasm
    host install ./hello.wasm
    host call hello '{"name": "Ada"}'

It needs no capability, so the default policy (deny everything) serves it
as it is; grants go under [plugins.hello] (the file's name).
"""

from mcp_plugin import ToolFailure, Tools, tool  # noqa: F401 (Tools is the export)


@tool(
    name="hello",
    description="Greets someone by name and says how long the greeting is.",
    input_schema={
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 100, "description": "Whom to greet."},
            "shout": {"type": "boolean", "default": False, "description": "Greet loudly (upper case)."},
        },
        "required": ["name"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {"text": {"type": "string"}, "chars": {"type": "integer", "minimum": 0}},
        "required": ["text", "chars"],
    },
    read_only=True,
)
def hello(args):
    name = args["name"].strip()
    if not name:
        raise ToolFailure("invalid_request", "name is only spaces: give a name")
    text = f"Hello, {name}!"
    if args.get("shout"):
        text = text.upper()
    return {"text": text, "chars": len(text)}
