from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.urls import include, path, re_path
from django.utils.translation import gettext_lazy
from django.views.decorators.csrf import csrf_exempt

from orca_memory.api import api, not_found
from orca_memory.core import pages

admin.site.site_header = admin.site.site_title = gettext_lazy("orca-memory admin")
admin.site.index_title = gettext_lazy("Messages, memories and accounts")

# Error pages in the site's layout, with its navigation (templates/400.html, 404.html, 500.html;
# 403.html is Django's own handler's, 403_csrf.html settings.CSRF_FAILURE_VIEW's).
handler400 = pages.bad_request
handler404 = pages.page_not_found
handler500 = pages.server_error


@csrf_exempt  # API clients send a key, not a CSRF token
def mcp(request: HttpRequest) -> HttpResponse:
    """/mcp, the MCP server (memory.mcp_server), imported when first used: the MCP SDK takes
    longer to import than Django, and every manage.py command loads these URLs for its checks.
    The web server's processes import it as they start (wsgi.py)."""
    from memory.mcp_server import mcp_endpoint

    return mcp_endpoint(request)


urlpatterns = [
    path("favicon.ico", pages.favicon),
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    path("mcp", mcp, name="mcp"),
    re_path(r"^api/v1/", not_found),  # any other path under the API, newlines included
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(next_page="login"), name="logout"),
    # The language switch (Django's set_language: a POST that sets the language cookie).
    path("i18n/", include("django.conf.urls.i18n")),
    path("", include("memory.urls")),
    path("", include("subagents.urls")),
]
