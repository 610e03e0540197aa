"""How OpenAI-compatible servers differ, for the fake to answer as each does (`set_behavior(server_kind=...)`):
which response formats a server takes and how it refuses the others (status and body, as that server sends
them), which reply bound it reads, what its `usage` holds, which model its replies name, and whether it serves one
request at a time.

- `openai`: json_schema and json_object; `max_tokens` or `max_completion_tokens`; full usage with
  `prompt_tokens_details`.
- `openai-reasoning` (OpenAI's o-series): refuses `max_tokens` with a 400 naming `max_completion_tokens`.
- `llama-cpp-python` (its FastAPI server): a 500 `internal_server_error` carrying pydantic's validation message
  for `json_schema`; takes `json_object` with or without a `schema` (which does not enforce numeric bounds);
  reads `max_tokens` only (`max_completion_tokens` is ignored: the reply runs on); usage without
  `prompt_tokens_details`; echoes whatever model it was asked for; serves one request at a time.
- `proxy`: a gateway that takes no `response_format` at all (a 400 naming it) and sends no `usage`.
"""

from __future__ import annotations

from dataclasses import dataclass

SERVER_KINDS = ("openai", "openai-reasoning", "llama-cpp-python", "proxy")

Refusal = tuple[int, dict]  # status, JSON body


@dataclass(frozen=True)
class ServerKind:
    name: str
    formats: tuple[str, ...]  # response_format kinds taken: json_schema, json_object, json_object+schema
    bounds: tuple[str, ...]  # the reply bound parameters it reads
    refuses_bounds: tuple[str, ...] = ()  # bound parameters it answers 400 to
    cache_details: bool = True  # usage.prompt_tokens_details
    usage: bool = True
    one_at_a_time: bool = False


KINDS = {
    "openai": ServerKind("openai", ("json_schema", "json_object"), ("max_tokens", "max_completion_tokens")),
    "openai-reasoning": ServerKind(
        "openai-reasoning",
        ("json_schema", "json_object"),
        ("max_completion_tokens",),
        refuses_bounds=("max_tokens",),
    ),
    "llama-cpp-python": ServerKind(
        "llama-cpp-python",
        ("json_object", "json_object+schema"),
        ("max_tokens",),
        cache_details=False,
        one_at_a_time=True,
    ),
    "proxy": ServerKind("proxy", (), ("max_tokens", "max_completion_tokens"), usage=False),
}


def kind_named(name: str) -> ServerKind:
    try:
        return KINDS[name]
    except KeyError:
        raise ValueError(f"unknown server kind {name!r}; choose from {SERVER_KINDS}") from None


def format_of(body: dict) -> str | None:
    """The response format a request asks for, as ServerKind.formats names it; None for none."""
    response_format = body.get("response_format")
    if response_format is None:
        return None
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind == "json_object" and "schema" in response_format:
        return "json_object+schema"
    return str(kind)


def _openai_error(status: int, message: str, kind: str, param: str | None, code: str | None) -> Refusal:
    return status, {"error": {"message": message, "type": kind, "param": param, "code": code}}


def refusal(server: ServerKind, body: dict) -> Refusal | None:
    """The error this kind of server answers to `body`, or None when it serves it."""
    for bound in server.refuses_bounds:
        if bound in body:
            other = next(name for name in server.bounds if name != bound)
            message = f"Unsupported parameter: '{bound}' is not supported with this model. Use '{other}' instead."
            return _openai_error(400, message, "invalid_request_error", bound, "unsupported_parameter")
    asked = format_of(body)
    if asked is None or asked in server.formats:
        return None
    if server.name == "llama-cpp-python":
        # FastAPI's validation error, caught by its route handler and wrapped as an internal server error.
        detail = {
            "type": "literal_error",
            "loc": ("body", "response_format", "type"),
            "msg": "Input should be 'text' or 'json_object'",
            "input": (body.get("response_format") or {}).get("type"),
            "ctx": {"expected": "'text' or 'json_object'"},
        }
        where = '  File "llama_cpp/server/app.py", line 376, in create_chat_completion\n    POST /v1/chat/completions'
        message = f"1 validation error:\n  {detail}\n\n{where}"  # as llama-cpp-python 0.3.36 answers
        return _openai_error(500, message, "internal_server_error", None, None)
    if not server.formats:  # a proxy, or a server told to refuse every response_format
        return _openai_error(
            400, "Unrecognized request argument supplied: response_format", "invalid_request_error", None, None
        )
    message = f"Invalid parameter: 'response_format' of type '{asked}' is not supported with this model."
    return _openai_error(400, message, "invalid_request_error", "response_format", None)


def bound_of(server: ServerKind, body: dict) -> int | None:
    """The reply bound this kind of server reads from `body` (None: it generates until the model stops)."""
    for name in server.bounds:
        value = body.get(name)
        if isinstance(value, int) and value > 0:
            return value
    return None


def shaped_usage(server: ServerKind, usage: dict) -> dict | None:
    """`usage` as this kind of server sends it (None: no usage at all)."""
    if not server.usage:
        return None
    if not server.cache_details:
        return {key: value for key, value in usage.items() if key != "prompt_tokens_details"}
    return usage
