"""Refuse a URL path that is not valid UTF-8 before any view sees it; choose the language of
a page (the API's is always English).

Django turns the undecodable bytes of a path back into "%XX" text (WSGIRequest's
`repercent_broken_unicode`: `a%FFb` arrives as the five characters `a%FFb`), and overwrites
the WSGI environ's PATH_INFO with that text, so a view would take it for the id the client
meant, and nothing after could tell it from an id that really contains "%FF" (sent as
`a%25FFb`). `keep_raw_path` keeps the path's bytes: it receives `request_started`, which
every WSGI handler (gunicorn's and runserver's application, the test client) sends with the
environ just before it makes the request. `Utf8PathMiddleware` connects it, and refuses the
request when those bytes are not UTF-8: in the API's error shape under /api/, with the
site's 400 page elsewhere.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.signals import request_started
from django.http import HttpRequest, HttpResponse
from django.middleware.locale import LocaleMiddleware
from django.urls import Resolver404, resolve
from django.utils import translation
from django.utils.translation import gettext as _

from orca_memory.core.errors import JSON_CONTENT_TYPE, error_body, errors_detail
from orca_memory.core.pages import bad_request

RAW_PATH_KEY = "orca.raw_path"
API_PREFIX = "/api/"
PATH_NOT_UTF8 = "the URL path is not valid UTF-8"


def keep_raw_path(sender: Any, *, environ: dict[str, Any] | None = None, **kwargs: Any) -> None:
    """The request path's bytes, kept in environ[RAW_PATH_KEY] (a receiver of
    request_started; ASGI handlers send a scope, not an environ, and are not used here)."""
    if environ is not None:
        # PEP 3333: the server gives the path's bytes as ISO-8859-1 text.
        environ[RAW_PATH_KEY] = environ.get("PATH_INFO", "").encode("iso-8859-1", "replace")


def _has_surrogates(value: str) -> bool:
    return value != value.encode("utf-8", "replace").decode("utf-8")


def _invalid_parameters(raw: bytes) -> list[str]:
    """The path parameters holding the broken bytes, for the error's `loc`."""
    try:
        match = resolve(raw.decode("utf-8", "surrogateescape"))
    except Resolver404:
        return []
    return [
        name
        for name, value in match.kwargs.items()
        if isinstance(value, str) and _has_surrogates(value)
    ]


class Utf8PathMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        request_started.connect(keep_raw_path, dispatch_uid=RAW_PATH_KEY)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        raw = request.META.get(RAW_PATH_KEY)
        if isinstance(raw, bytes):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                return self._refuse(request, raw)
        return self.get_response(request)

    def _refuse(self, request: HttpRequest, raw: bytes) -> HttpResponse:
        if not request.path_info.startswith(API_PREFIX):
            reason = _("The address is not valid UTF-8: it holds bytes that are not text.")
            return bad_request(request, UnicodeError(PATH_NOT_UTF8), reason=reason)
        # The API's 422: each path parameter at fault, or the path as a whole.
        errors = [(("path", name), PATH_NOT_UTF8) for name in _invalid_parameters(raw)]
        errors = errors or [(("path",), PATH_NOT_UTF8)]
        return HttpResponse(
            json.dumps(error_body(errors_detail(errors), errors)),
            status=422,
            content_type=JSON_CONTENT_TYPE,
        )


class DashboardLocaleMiddleware(LocaleMiddleware):
    """Django's LocaleMiddleware (the language switch's cookie, else Accept-Language, else
    English) for the dashboard and the admin. The API answers in English whatever a client's
    Accept-Language says: agents parse its messages."""

    def process_request(self, request: HttpRequest) -> None:
        if request.path.startswith(API_PREFIX):
            translation.activate(settings.LANGUAGE_CODE)
            request.LANGUAGE_CODE = settings.LANGUAGE_CODE
            return
        super().process_request(request)

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if request.path.startswith(API_PREFIX):
            return response
        return super().process_response(request, response)
