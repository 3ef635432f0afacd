"""Helpers every app's dashboard pages share: one view answers both a whole page and its htmx
partial, and a page asks for the permissions it needs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.cache import patch_vary_headers


def render_page(
    request: HttpRequest, template_name: str, context: dict[str, Any], *, partial: str
) -> HttpResponse:
    """The whole page, or only its `partial` for an htmx request.

    htmx restoring history after a cache miss (the back button) needs the whole page again.
    """
    if request.htmx and not request.htmx.history_restore_request:
        template_name = f"{template_name}#{partial}"
    response = render(request, template_name, context)
    # The same URL answers two bodies: caches must key on the header that chooses.
    patch_vary_headers(response, ["HX-Request"])
    return response


def needs(permissions: tuple[str, ...]) -> Callable[..., Any]:
    """403 for a signed-in user without every one of `permissions`; under @login_required,
    which sends anonymous visitors to sign in first."""
    return permission_required(permissions, raise_exception=True)
