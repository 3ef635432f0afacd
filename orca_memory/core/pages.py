"""Helpers every app's dashboard pages share: one view answers both a whole page and its htmx
partial, a page asks for the permissions it needs, the navigation marks where a page is; and
the site's error pages and favicon."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import permission_required
from django.db.models import Model
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseServerError,
)
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.templatetags.static import static
from django.utils.cache import patch_vary_headers
from django.utils.functional import Promise
from django.utils.translation import gettext as _
from django.views.decorators.csrf import requires_csrf_token

StrOrPromise = str | Promise  # a name, or one gettext_lazy translates when shown

# The navigation's link for each section of the site, by the first segment of a page's URL
# pattern (as urls.py spells it, never the visitor's path): a sub-agent run belongs to its
# session. The link is the current page on the section's own page, its parent elsewhere.
NAV_SECTIONS = {
    "": "dashboard",
    "sessions": "sessions",
    "messages": "sessions",
    "search": "search",
    "memories": "memories",
    "forget": "forget",
}


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


def object_or_404[M: Model](model: type[M], pk: int, name: StrOrPromise) -> M:
    """The row, or a 404 whose page (and the error htmx shows) says which `name` is gone."""
    try:
        return model._default_manager.get(pk=pk)
    except model.DoesNotExist:
        reason = _("No %(name)s #%(pk)d: it was deleted, or never existed.")
        raise Http404(reason % {"name": name, "pk": pk}) from None


def navigation(request: HttpRequest) -> dict[str, str]:
    """Template context (a context processor): `nav_section`, the nav link to mark, and
    `nav_current`, its aria-current ("page" on the section's own page, else "true")."""
    match = request.resolver_match
    section = match and NAV_SECTIONS.get(match.route.split("/", 1)[0])
    if not section:
        return {}
    return {"nav_section": section, "nav_current": "page" if match.url_name == section else "true"}


@requires_csrf_token  # base.html puts the token in htmx's headers; a 404 can precede the check
def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """404.html in the site's layout, with the reason a view gave (`Http404("No such
    session")`); an address no URL pattern matches has none."""
    message = exception.args[0] if exception.args else None
    reason = message if isinstance(message, str) else ""
    return render(request, "404.html", {"reason": reason}, status=404)


@requires_csrf_token
def server_error(request: HttpRequest) -> HttpResponse:
    """500.html in the site's layout, with the visitor's navigation when it can still be read:
    the database it comes from (the user, their permissions) may be what failed, and then the
    page is rendered without the request, as Django's own handler does."""
    return HttpResponseServerError(_error_body("500.html", request, {}))


@requires_csrf_token
def bad_request(request: HttpRequest, exception: Exception, *, reason: str = "") -> HttpResponse:
    """400.html in the site's layout (a Host not allowed, a malformed request, or the `reason`
    a caller gives); the request itself may be what is wrong, so it is rendered without it
    when it must be."""
    return HttpResponseBadRequest(_error_body("400.html", request, {"reason": reason}))


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: a form sent without a valid token (a page open from before the
    session expired, or a form on another site), in the layout, saying what to do."""
    return render(request, "403_csrf.html", {"reason": reason}, status=403)


def _error_body(template_name: str, request: HttpRequest, context: dict[str, Any]) -> str:
    try:
        return render_to_string(template_name, context, request=request)
    except Exception:
        return render_to_string(template_name, context)


def favicon(request: HttpRequest) -> HttpResponse:
    """/favicon.ico, which browsers ask for where a page names no icon (the admin, the API
    docs): the site's SVG icon."""
    return redirect(static("favicon.svg"), permanent=True)
