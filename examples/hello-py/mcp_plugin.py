"""The host's plugin world for Python: declare tools with @tool.

A module importing this and naming `Tools` (as app.py does) is a plugin:
componentize-py builds it into a component whose `tools` export lists the
declared tools and runs them. The host validates every call's arguments
against the tool's input schema before `call` runs.
"""

import json
from dataclasses import dataclass
from typing import Any, Callable, Optional

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import types


class ToolFailure(Exception):
    """Raise to answer a call with a tool error (MCP `isError: true`)."""

    def __init__(self, code: str, message: str, retryable: bool = False, details: Any = None):
        super().__init__(message)
        self.code, self.message, self.retryable, self.details = code, message, retryable, details


@dataclass
class _Declared:
    name: str
    description: str
    input_schema: dict
    output_schema: Optional[dict]
    handler: Callable[[dict], Any]


_TOOLS: list = []


def tool(name: str, description: str, input_schema: dict, output_schema: Optional[dict] = None,
         title: Optional[str] = None, read_only: bool = False, destructive: bool = False,
         idempotent: bool = False, open_world: bool = False):
    """Declare the decorated function as a tool. It gets the arguments as a
    dict and returns a str (text) or a JSON value (structured content, and
    its JSON as text)."""
    annotations = {"readOnlyHint": read_only, "destructiveHint": destructive,
                   "idempotentHint": idempotent, "openWorldHint": open_world}
    if title:
        annotations["title"] = title
    schema = dict(input_schema, **{"x-annotations": annotations})

    def register(handler):
        _TOOLS.append(_Declared(name, description, schema, output_schema, handler))
        return handler
    return register


# What a capability's error variant is called here, as a tool error code.
_CODES = {"Denied": "denied", "Invalid": "invalid_request", "NotFound": "not_found"}


class Tools(exports.Tools):
    def list(self):
        return [types.Tool(name=t.name, description=t.description,
                           input_schema=json.dumps(t.input_schema),
                           output_schema=json.dumps(t.output_schema) if t.output_schema else None)
                for t in _TOOLS]

    def call(self, name: str, arguments: str) -> types.ToolOutput:
        declared = next((t for t in _TOOLS if t.name == name), None)
        if declared is None:
            raise Err(types.ToolError(code="not_found", message=f"no tool {name}", retryable=False, details=None))
        try:
            result = declared.handler(json.loads(arguments))
        except ToolFailure as failure:
            details = json.dumps(failure.details) if failure.details is not None else None
            raise Err(types.ToolError(code=failure.code, message=failure.message,
                                      retryable=failure.retryable, details=details))
        except Err as refused:
            # A capability the host refused (the policy does not grant it).
            variant = type(refused.value).__name__.rsplit("_", 1)[-1]
            raise Err(types.ToolError(code=_CODES.get(variant, "failed"),
                                      message=str(getattr(refused.value, "value", refused.value)),
                                      retryable=False, details=None))
        if isinstance(result, str):
            return types.ToolOutput(text=result, structured=None)
        text = json.dumps(result)
        return types.ToolOutput(text=text, structured=text if declared.output_schema else None)
