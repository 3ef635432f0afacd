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
        return json.loads(request.body.decode("utf-8", "surrogateescape"))


class Utf8JSONRenderer(JSONRenderer):
    """JSON (UTF-8) with Chinese and any other text as itself, not as \\uXXXX escapes."""

    json_dumps_params = {"ensure_ascii": False}


api = NinjaAPI(
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
