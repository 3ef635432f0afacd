"""Refuse a URL path that is not valid UTF-8 before any view sees it; choose the language of
a page (the API's is always English).

Django turns the undecodable bytes of a path back into "%XX" text (`a%FFb` arrives as the
five characters `a%FFb`), and overwrites the WSGI environ's PATH_INFO with that text, so a
view would take it for the id the client meant, and nothing after could tell it from an id
that really contains "%FF" (sent as `a%25FFb`). `keep_raw_path` wraps the WSGI application
to keep the path's bytes; `Utf8PathMiddleware` refuses the request when they are not UTF-8.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.middleware.locale import LocaleMiddleware
from django.urls import Resolver404, resolve
from django.utils import translation

RAW_PATH_KEY = "orca.raw_path"
API_PREFIX = "/api/"


def keep_raw_path(application: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
    """The WSGI application, with the request path's bytes kept in environ[RAW_PATH_KEY]."""

    def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        # PEP 3333: the server gives the path's bytes as ISO-8859-1 text.
        environ[RAW_PATH_KEY] = environ.get("PATH_INFO", "").encode("iso-8859-1", "replace")
        return application(environ, start_response)

    return wsgi


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

    def __call__(self, request: HttpRequest) -> HttpResponse:
        raw = request.META.get(RAW_PATH_KEY)
        if isinstance(raw, bytes):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                return self._refuse(request, raw)
        return self.get_response(request)

    def _refuse(self, request: HttpRequest, raw: bytes) -> HttpResponse:
        message = "the URL path is not valid UTF-8"
        if not request.path_info.startswith(API_PREFIX):
            return HttpResponseBadRequest(message)
        # The API's 422 shape: each invalid field with where it is.
        names = _invalid_parameters(raw) or [None]
        detail = [{"loc": ["path", name] if name else ["path"], "msg": message} for name in names]
        return JsonResponse({"detail": detail}, status=422)


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
