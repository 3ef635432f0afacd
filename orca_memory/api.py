"""The NinjaAPI at /api/v1/: auth, the one error shape, and each app's router.

Every error answers `{"detail": "...", "errors": [{"loc": [...], "msg": "..."}]}`
(orca_memory.core.errors). OpenAPI docs at /api/v1/docs.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from typing import Any

from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from ninja import NinjaAPI
from ninja.errors import HttpError, ValidationError, ValidationErrorContext
from ninja.parser import Parser
from ninja.renderers import JSONRenderer

from memory.api import router as memory_router
from memory.api_archive import router as archive_router
from memory.api_forget import router as forget_router
from memory.auth import UNAUTHORIZED_DETAIL, ApiKeyAuth
from memory.jsonl import BackupFailed
from memory.outage import (
    RETRY_AFTER_SECONDS,
    backup_failed_detail,
    is_unavailable,
    unavailable_detail,
)
from memory.validation import (
    NON_FINITE_MESSAGE,
    Conflict,
    ContentTooLarge,
    InvalidInput,
    InvalidItems,
)
from orca_memory.core.errors import Loc, error_body, errors_detail, field_errors
from subagents.api import router as subagents_router

logger = logging.getLogger(__name__)


class UnsupportedMediaType(ValueError):
    """A body that does not say it is JSON (HTTP 415)."""


class NonFiniteNumber(ValueError):
    """NaN, Infinity or a number too large for a float (1e400) in a body (HTTP 422)."""

    def __init__(self, loc: Loc) -> None:
        super().__init__(NON_FINITE_MESSAGE)
        self.loc = loc


def _is_json(media_type: str) -> bool:
    return media_type == "application/json" or (
        media_type.startswith("application/") and media_type.endswith("+json")
    )


def _first_non_finite(data: Any) -> Loc | None:
    """Where the body holds a non-finite number, if anywhere (a loop: bodies nest deep)."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), data)]
    while stack:
        loc, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return loc
        if isinstance(value, dict):
            stack.extend(((*loc, key), item) for key, item in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend(((*loc, i), item) for i, item in reversed(list(enumerate(value))))
    return None


class JsonParser(Parser):
    """JSON object bodies, declared as such, with finite numbers only.

    Python's json takes NaN, Infinity and 1e400, which JSON and SQLite's JSON columns refuse:
    they are refused here, before any view runs, whatever field holds them. Invalid UTF-8
    bytes survive as lone surrogates, so that the text fields' validation rejects them with a
    422 naming the field, rather than the whole body failing to parse.
    """

    def parse_body(self, request: HttpRequest) -> Any:
        # django-ninja answers any error raised here as a 400; the API's HttpError handler
        # answers these two with their own status (415, 422) from the exception's cause.
        if not _is_json(request.content_type or ""):
            raise UnsupportedMediaType(
                f"the body must be JSON (Content-Type: application/json), "
                f"not {request.content_type or 'undeclared'}"
            )
        data = json.loads(request.body.decode("utf-8", "surrogateescape"))
        if not isinstance(data, dict):
            raise ValueError("the body must be a JSON object")
        where = _first_non_finite(data)
        if where is not None:
            raise NonFiniteNumber(where)
        return data


class Utf8JSONRenderer(JSONRenderer):
    """JSON (UTF-8) with Chinese and any other text as itself, not as \\uXXXX escapes."""

    json_dumps_params = {"ensure_ascii": False}


# Every operation can answer these, always in the one error shape: documented once for all.
ERROR_RESPONSES = {
    "400": "The body is not a JSON object, or the request is malformed.",
    "401": "No valid API key.",
    "404": "No such session, message or memory for this agent.",
    "409": "The request contradicts the stored state (a finished sub-agent run, an "
    "Idempotency-Key used for another request).",
    "413": "Content above max_content_bytes, metadata above max_metadata_bytes, or a body "
    "above the request size limit.",
    "415": "A body that is not declared as application/json.",
    "422": "An invalid field: `errors` lists which (`loc`) and why (`msg`).",
    "500": "An unexpected error, logged on the server.",
    "503": "The database is unavailable (locked, full, cannot be opened, connection lost): "
    "nothing was changed; retry after the Retry-After header's seconds.",
}
ERROR_SCHEMA = {
    "type": "object",
    "properties": {
        "detail": {"type": "string", "description": "what went wrong"},
        "errors": {
            "type": "array",
            "description": "the parts of the request at fault; empty when none is",
            "items": {
                "type": "object",
                "properties": {
                    "loc": {
                        "type": "array",
                        "description": "path, query, header or body, then the field and any "
                        "keys or indexes inside it",
                        "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                    },
                    "msg": {"type": "string"},
                },
                "required": ["loc", "msg"],
            },
        },
    },
    "required": ["detail", "errors"],
}


class OrcaAPI(NinjaAPI):
    def get_openapi_schema(self, **kwargs: Any) -> Any:
        schema = super().get_openapi_schema(**kwargs)
        schema.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
        reference = {"$ref": "#/components/schemas/Error"}
        for operations in schema["paths"].values():
            for operation in operations.values():
                responses = operation.setdefault("responses", {})
                for status, description in ERROR_RESPONSES.items():
                    responses.setdefault(
                        status,
                        {
                            "description": description,
                            "content": {"application/json": {"schema": reference}},
                        },
                    )
        return schema

    def validation_error_from_error_contexts(
        self, error_contexts: list[ValidationErrorContext]
    ) -> ValidationError:
        """Locations as the client sent them: ["body", "content"], not django-ninja's
        ["body", "payload", "content"] (`payload` is the view's parameter, not the client's)."""
        error = super().validation_error_from_error_contexts(error_contexts)
        body_params = {
            name
            for context in error_contexts
            if context.model.__ninja_param_source__ == "body"
            and len(context.model.model_fields) == 1
            for name in context.model.model_fields
        }
        for item in error.errors:
            loc = tuple(item["loc"])
            if loc[:1] == ("body",) and len(loc) > 1 and loc[1] in body_params:
                item["loc"] = ("body", *loc[2:])
        return error


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
api.add_router("/", forget_router)
api.add_router("/", subagents_router)
api.add_router("/", archive_router)


def _error(
    request: HttpRequest, status: int, detail: str, errors: Sequence[tuple[Loc, str]] = ()
) -> HttpResponse:
    return api.create_response(request, error_body(detail, errors), status=status)


def _loc(request: HttpRequest, field: str | None) -> Loc:
    """Where a field named by a domain check was sent: in the path, the query or the body
    (nowhere in particular when the check named none)."""
    if field is None:
        return ()
    match = request.resolver_match
    if match is not None and field in match.kwargs:
        return ("path", field)
    return ("query" if request.method == "GET" else "body", field)


@api.exception_handler(ValidationError)
def validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    errors = field_errors(exc.errors)
    return _error(request, 422, errors_detail(errors), errors)


@api.exception_handler(ContentTooLarge)
def content_too_large(request: HttpRequest, exc: ContentTooLarge) -> HttpResponse:
    return _error(request, 413, str(exc), [(_loc(request, exc.field), str(exc))])


@api.exception_handler(InvalidItems)
def invalid_items(request: HttpRequest, exc: InvalidItems) -> HttpResponse:
    """Each item at fault where the client sent it: ["body", "messages", 3, "content"]."""
    too_large = all(isinstance(error, ContentTooLarge) for _, error in exc.errors)
    errors = [
        (("body", exc.field or "", index, *filter(None, [error.field])), str(error))
        for index, error in exc.errors
    ]
    return _error(request, 413 if too_large else 422, str(exc), errors)


@api.exception_handler(InvalidInput)
def invalid_input(request: HttpRequest, exc: InvalidInput) -> HttpResponse:
    return _error(request, 422, str(exc), [(_loc(request, exc.field), str(exc))])


@api.exception_handler(Conflict)
def conflict(request: HttpRequest, exc: Conflict) -> HttpResponse:
    return _error(request, 409, str(exc))


@api.exception_handler(RequestDataTooBig)
def body_too_large(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    return _error(request, 413, "request body too large", [(("body",), str(exc))])


@api.exception_handler(SuspiciousOperation)
def malformed_request(request: HttpRequest, exc: SuspiciousOperation) -> HttpResponse:
    # Such as more query parameters than DATA_UPLOAD_MAX_NUMBER_FIELDS: the client's fault.
    logger.warning("Refused %s %s: %s", request.method, request.path, exc)
    return _error(request, 400, "malformed request", [((), str(exc))])


@api.exception_handler(HttpError)
def http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    """django-ninja's errors: 401 for a missing key, 400 for a body the parser refused (its
    cause says why, and JsonParser's own refusals have a status of their own)."""
    cause = exc.__cause__
    if isinstance(cause, NonFiniteNumber):
        where = ".".join(map(str, cause.loc))
        return _error(request, 422, f"{where}: {cause}", [(("body", *cause.loc), str(cause))])
    if isinstance(cause, UnsupportedMediaType):
        return _error(request, 415, str(cause), [(("header", "Content-Type"), str(cause))])
    if cause is not None and exc.status_code == 400:
        return _error(request, 400, "the body is not a JSON object", [(("body",), str(cause))])
    if exc.status_code == 401:  # no key, or not a valid one: say how to get one
        return _error(request, 401, UNAUTHORIZED_DETAIL)
    return _error(request, exc.status_code, str(exc))


@api.exception_handler(Http404)
def not_found_error(request: HttpRequest, exc: Http404) -> HttpResponse:
    return _error(request, 404, "Not Found")


@api.exception_handler(OperationalError)
@api.exception_handler(InterfaceError)
def database_error(request: HttpRequest, exc: DatabaseError) -> HttpResponse:
    """An outage (memory.outage) answers 503 with Retry-After: nothing was changed, and the
    same request succeeds later. Any other database error is a bug: a 500."""
    if not is_unavailable(exc):
        return server_error(request, exc)
    logger.error("Database unavailable in %s %s: %s", request.method, request.path, exc)
    return _unavailable(request, unavailable_detail(exc))


@api.exception_handler(BackupFailed)
def backup_failed(request: HttpRequest, exc: BackupFailed) -> HttpResponse:
    """The database was unavailable and the JSONL backup could not keep the messages either
    (its disk full): nothing is kept, and the client must send them again."""
    logger.error("DATABASE UNAVAILABLE and the JSONL backup failed: %s", exc)
    return _unavailable(request, backup_failed_detail(exc))


def _unavailable(request: HttpRequest, detail: str) -> HttpResponse:
    response = _error(request, 503, detail)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


@api.exception_handler(Exception)
def server_error(request: HttpRequest, exc: Exception) -> HttpResponse:
    # Logged with its traceback for the operator; the client learns nothing internal.
    logger.exception("Unhandled error in %s %s", request.method, request.path)
    return _error(request, 500, "internal server error")


@csrf_exempt  # it changes nothing, and API clients send no CSRF token
def not_found(request: HttpRequest) -> HttpResponse:
    """A path under /api/v1/ that matches no operation: JSON like every other error."""
    return _error(request, 404, "Not Found")
