"""The NinjaAPI at /api/v1/: auth, the one error shape, and each app's router.

Every error answers `{"detail": ...}`: a message, or for 422 the list of invalid fields.
OpenAPI docs at /api/v1/docs.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from ninja import NinjaAPI
from ninja.parser import Parser
from ninja.renderers import JSONRenderer

from memory.api import router as memory_router
from memory.auth import ApiKeyAuth
from memory.validation import Conflict, ContentTooLarge, InvalidInput
from subagents.api import router as subagents_router

logger = logging.getLogger(__name__)


class JsonParser(Parser):
    """JSON bodies whose invalid UTF-8 bytes survive as lone surrogates.

    The text fields' validation then rejects them with a 422 naming the field, rather than
    the whole body failing to parse.
    """

    def parse_body(self, request: HttpRequest) -> Any:
        data = json.loads(request.body.decode("utf-8", "surrogateescape"))
        if not isinstance(data, dict):
            raise ValueError("the body must be a JSON object")  # answered 400
        return data


class Utf8JSONRenderer(JSONRenderer):
    """JSON (UTF-8) with Chinese and any other text as itself, not as \\uXXXX escapes."""

    json_dumps_params = {"ensure_ascii": False}


# Every operation can answer these, always as {"detail": ...}: documented once for all.
ERROR_RESPONSES = {
    "400": "The body is not a JSON object.",
    "401": "No valid API key.",
    "404": "No such session, message or memory for this agent.",
    "409": "The request contradicts the stored state (a finished sub-agent run).",
    "413": "Content above max_content_bytes, or a body above Django's limit.",
    "422": "An invalid field: the detail lists which and why.",
    "500": "An unexpected error, logged on the server.",
}
ERROR_SCHEMA = {
    "type": "object",
    "properties": {"detail": {"anyOf": [{"type": "string"}, {"type": "array"}]}},
    "required": ["detail"],
}


class OrcaAPI(NinjaAPI):
    def get_openapi_schema(self, **kwargs: Any) -> Any:
        schema = super().get_openapi_schema(**kwargs)
        for operations in schema["paths"].values():
            for operation in operations.values():
                responses = operation.setdefault("responses", {})
                for status, description in ERROR_RESPONSES.items():
                    responses.setdefault(
                        status,
                        {
                            "description": description,
                            "content": {"application/json": {"schema": ERROR_SCHEMA}},
                        },
                    )
        return schema


api = OrcaAPI(
    title="orca-memory",
    version="1",
    description="Memory for LLM agents: store messages, ask for context. "
    "Send `Authorization: Bearer <key>` (`manage.py create_api_key --agent NAME`).",
    auth=ApiKeyAuth(),
    parser=JsonParser(),
    renderer=Utf8JSONRenderer(),
    urls_namespace="api-v1",
)
api.add_router("/", memory_router)
api.add_router("/", subagents_router)


def _detail(request: HttpRequest, status: int, detail: Any) -> HttpResponse:
    return api.create_response(request, {"detail": detail}, status=status)


@api.exception_handler(ContentTooLarge)
def content_too_large(request: HttpRequest, exc: ContentTooLarge) -> HttpResponse:
    return _detail(request, 413, str(exc))


@api.exception_handler(InvalidInput)
def invalid_input(request: HttpRequest, exc: InvalidInput) -> HttpResponse:
    return _detail(request, 422, str(exc))


@api.exception_handler(Conflict)
def conflict(request: HttpRequest, exc: Conflict) -> HttpResponse:
    return _detail(request, 409, str(exc))


@api.exception_handler(RequestDataTooBig)
def body_too_large(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    return _detail(request, 413, "request body too large")


@api.exception_handler(Exception)
def server_error(request: HttpRequest, exc: Exception) -> HttpResponse:
    # Logged with its traceback for the operator; the client learns nothing internal.
    logger.exception("Unhandled error in %s %s", request.method, request.path)
    return _detail(request, 500, "internal server error")


@csrf_exempt  # it changes nothing, and API clients send no CSRF token
def not_found(request: HttpRequest) -> HttpResponse:
    """A path under /api/v1/ that matches no operation: JSON like every other error."""
    return _detail(request, 404, "Not Found")
