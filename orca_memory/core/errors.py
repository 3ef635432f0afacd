"""The API's one error shape, and the middleware that gives it to errors answered outside
django-ninja's exception handlers.

Every error under /api/ answers

    {"detail": "<what went wrong, in one sentence>",
     "errors": [{"loc": ["body", "metadata", "x"], "msg": "<why>"}, ...]}

`detail` is always a string; `errors` lists the parts of the request at fault (where in it:
"path", "query", "header" or "body", then the field and any keys or indexes inside it), and
is empty when the request as a whole is refused (401, 404, 405, 409, 500).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from http import HTTPStatus
from typing import Any

from django.http import HttpRequest, HttpResponse

API_PREFIX = "/api/"
JSON_CONTENT_TYPE = "application/json; charset=utf-8"

Loc = Sequence[str | int]


def error_body(detail: str, errors: Iterable[tuple[Loc, str]] = ()) -> dict[str, Any]:
    return {"detail": detail, "errors": [{"loc": list(loc), "msg": msg} for loc, msg in errors]}


def field_errors(items: Iterable[Mapping[str, Any]]) -> list[tuple[Loc, str]]:
    """pydantic's errors as (loc, msg), without the prefix pydantic gives the message of a
    ValueError a validator raised (the field says it)."""
    return [(tuple(item["loc"]), item["msg"].removeprefix("Value error, ")) for item in items]


def errors_detail(errors: Iterable[tuple[Loc, str]]) -> str:
    """The invalid fields in one sentence, `content: why; k: why`, each named without where it
    was sent (its loc's first part, when it has more)."""
    return "; ".join(f"{'.'.join(map(str, loc[1:] or loc))}: {msg}" for loc, msg in errors)


def _is_json(response: HttpResponse) -> bool:
    return response.get("Content-Type", "").startswith("application/json")


class ApiErrorsAsJson:
    """Errors under /api/ that Django answers itself, in the API's shape: 405 for a method a
    path does not take (django-ninja answers it as text), 400 for a Host header not in
    ALLOWED_HOSTS, and any error page of Django's. First in MIDDLEWARE, so it sees them all."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            not request.path.startswith(API_PREFIX)
            or response.status_code < 400
            or _is_json(response)
        ):
            return response
        status = response.status_code
        detail = HTTPStatus(status).phrase if status in HTTPStatus else "Error"
        allowed = response.get("Allow")
        if allowed:
            detail += f" (allowed: {allowed})"
        replaced = HttpResponse(
            json.dumps(error_body(detail)),
            status=status,
            content_type=JSON_CONTENT_TYPE,
        )
        if allowed:
            replaced["Allow"] = allowed
        return replaced


# --- /mcp: errors as JSON-RPC ------------------------------------------------------------
# MCP's path, and JSON-RPC 2.0's codes for a request refused as a whole and for a failure of
# the server (mcp_types names them too; not imported here: the SDK is slow to import).
MCP_PATH = "/mcp"
JSONRPC_INVALID_REQUEST = -32600
JSONRPC_INTERNAL_ERROR = -32603


def jsonrpc_error(status: int, code: int, message: str) -> HttpResponse:
    """An error answered before any JSON-RPC request is read, so with no id (`null`)."""
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    return HttpResponse(json.dumps(body), status=status, content_type=JSON_CONTENT_TYPE)


class McpErrorsAsJsonRpc:
    """Errors at /mcp that Django answers itself, as JSON-RPC errors: 400 for a Host header not
    in ALLOWED_HOSTS (answered before the view runs), and the 500 of an exception the view let
    through. Beside ApiErrorsAsJson, first in MIDDLEWARE, so it sees them all."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if request.path != MCP_PATH or response.status_code < 400 or _is_json(response):
            return response
        status = response.status_code
        code = JSONRPC_INTERNAL_ERROR if status >= 500 else JSONRPC_INVALID_REQUEST
        phrase = HTTPStatus(status).phrase if status in HTTPStatus else "Error"
        replaced = jsonrpc_error(status, code, phrase)
        if "Retry-After" in response:  # a 503's, while the database is unavailable
            replaced["Retry-After"] = response["Retry-After"]
        return replaced
