"""What every page shares, through Django's test client: error pages in the site's layout,
the navigation's current page, the dashboard's links, the admin's title, the favicon."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.db.utils import OperationalError
from django.test import Client
from django.urls import reverse

from memory import views
from memory.models import LongTermMemory
from orca_memory.core import pages

HTMX = {"HX-Request": "true"}

pytestmark = pytest.mark.django_db


def nav(body: str) -> str:
    return body[body.index("<nav>") : body.index("</nav>")]


def test_it_answers_unknown_pages_with_a_404_page_in_the_layout(admin_client, conversation):
    deleted = conversation.tea.pk
    LongTermMemory.objects.filter(pk=deleted).delete()
    cases = {
        reverse("session", args=["agent-a", "nope"]): "Agent agent-a has no session nope.",
        reverse("memory", args=[deleted]): f"No memory #{deleted}: it was deleted",
        reverse("memory_edit", args=[deleted]): f"No memory #{deleted}: it was deleted",
        reverse("subagent_run", args=[999999]): "No message #999999: it was deleted",
        "/no/such/page/": "No page lives at this address.",
    }
    for url, reason in cases.items():
        for headers in ({}, HTMX):  # htmx gets the page too: static/requests.js reads its reason
            response = admin_client.get(url, headers=headers)
            body = response.content.decode()
            assert response.status_code == 404, url
            assert response.templates[0].name == "404.html"
            assert f"<p data-error-reason>{reason}" in body, url
            assert all(reverse(n) in nav(body) for n in ("dashboard", "sessions", "memories"))
    assert not LongTermMemory.objects.filter(pk=deleted).exists()


def test_the_404_page_marks_the_section_it_is_in(admin_client, conversation):
    body = admin_client.get(reverse("session", args=["agent-a", "nope"])).content.decode()
    assert f'<a href="{reverse("sessions")}" aria-current="true">Sessions</a>' in body
    assert "aria-current" not in nav(admin_client.get("/no/such/page/").content.decode())


def test_the_navigation_marks_the_current_page(admin_client, conversation):
    def current(url: str) -> list[tuple[str, str]]:
        links = nav(admin_client.get(url).content.decode()).split("<a ")[1:]
        return [
            (link.split(">")[1].split("<")[0], link.split('aria-current="')[1].split('"')[0])
            for link in links
            if "aria-current" in link
        ]

    assert current(reverse("dashboard")) == [("Dashboard", "page")]
    assert current(reverse("sessions")) == [("Sessions", "page")]
    assert current(reverse("session", args=["agent-a", "s-1"])) == [("Sessions", "true")]
    assert current(reverse("subagent_run", args=[conversation.ask.pk])) == [("Sessions", "true")]
    assert current(reverse("memories")) == [("Memories", "page")]
    assert current(reverse("memory", args=[conversation.tea.pk])) == [("Memories", "true")]


def test_a_server_error_shows_the_500_page_with_the_navigation(
    admin_user, conversation, monkeypatch
):
    def fail() -> None:
        raise RuntimeError("the health check broke")

    monkeypatch.setattr(views, "service_health", fail)
    client = Client(raise_request_exception=False)
    client.force_login(admin_user)
    for headers in ({}, HTMX):
        response = client.get(reverse("dashboard"), headers=headers)
        body = response.content.decode()
        assert response.status_code == 500
        assert "<p data-error-reason>The server failed on this request; its log says why." in body
        assert "the health check broke" not in body  # the traceback is for the log
        assert reverse("memories") in nav(body)
    assert LongTermMemory.objects.count() == 2


def test_the_500_page_renders_without_the_request_when_it_must(rf, monkeypatch):
    """The database may be what failed: the user and their permissions cannot be read."""

    class Broken:
        @property
        def is_authenticated(self) -> bool:
            raise OperationalError("database is locked")

    request = rf.get("/")
    request.user = Broken()
    response = pages.server_error(request)
    body = response.content.decode()
    assert response.status_code == 500
    assert "Something went wrong on the server" in body
    assert "<nav>" not in body
    assert reverse("dashboard") in body  # the way back still works


def test_a_form_without_its_csrf_token_gets_the_site_page_and_changes_nothing(
    admin_user, conversation
):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    url = reverse("memory_expire", args=[conversation.tea.pk])
    for headers in ({}, HTMX):
        response = client.post(url, headers=headers)
        body = response.content.decode()
        assert response.status_code == 403
        assert "<p data-error-reason>The form was sent without a valid security token" in body
        assert "(CSRF " in body  # Django's reason (cookie not set, token missing), for debugging
        assert reverse("memories") in nav(body)
    conversation.tea.refresh_from_db()
    assert conversation.tea.expires_at is None


def test_a_host_not_allowed_gets_the_400_page_in_the_layout(client, settings):
    settings.DEBUG = False
    response = client.get(reverse("dashboard"), headers={"Host": "evil.example"})
    body = response.content.decode()
    assert response.status_code == 400
    assert "<p data-error-reason>The request was malformed, or it named a host" in body
    assert "ORCA_ALLOWED_HOSTS" in body


def test_the_dashboard_counts_link_to_their_lists(admin_client, conversation):
    body = admin_client.get(reverse("dashboard")).content.decode()
    sessions = reverse("sessions")
    assert f'<a class="count card" href="{sessions}"><span class="n">1</span> session</a>' in body
    summaries = reverse("admin:memory_shorttermmemory_changelist")
    assert f'href="{summaries}"><span class="n">1</span> summary</a>' in body
    memories = f"{reverse('memories')}?memory_type=preference&amp;state=active"
    assert f'href="{memories}"><span class="n">1</span> active preference memory</a>' in body
    listed = admin_client.get(reverse("memories"), {"memory_type": "preference", "state": "active"})
    assert [m.pk for m in listed.context["page"]] == [conversation.tea.pk]


def test_the_dashboard_links_only_to_lists_the_user_may_open(client, conversation):
    viewer = User.objects.create_user("vera", password="pw")
    viewer.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_mainmessage", "view_shorttermmemory"])
    )
    client.force_login(viewer)
    body = client.get(reverse("dashboard")).content.decode()
    assert '<a class="count card"><span class="n">1</span> summary</a>' in body  # not staff
    assert '<a class="count card"><span class="n">1</span> active preference memory</a>' in body


def test_the_status_badge_is_coloured_by_the_status(admin_client, db):
    response = admin_client.get(reverse("dashboard"))
    status = response.context["health"].status
    assert status in ("ok", "degraded", "error")  # base.css colours .badge.ok/degraded/error
    assert f'<span class="badge {status}">{status}</span>' in response.content.decode()


def test_the_admin_is_titled_for_the_service(admin_client):
    body = admin_client.get(reverse("admin:index")).content.decode()
    assert "<title>Messages, memories and accounts | orca-memory admin</title>" in body
    assert "orca-memory admin</a>" in body
    assert "Django administration" not in body


def test_it_answers_favicon_ico_with_the_site_icon(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301
    assert response["Location"] == "/static/favicon.svg"
    page = client.get(reverse("login")).content.decode()
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in page
