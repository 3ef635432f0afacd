"""The dashboard's pages and htmx partials, through Django's test client."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from memory.memories import memory_expire
from memory.messages import message_add
from memory.models import LongTermMemory, LongTermMemoryHistory, MainMessage
from memory.vectors import rebuild_index, vector_search_status

HTMX = {"HX-Request": "true"}
XSS = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"

pytestmark = pytest.mark.django_db


def session_url(agent_id: str = "agent-a", session_id: str = "s-1") -> str:
    return reverse("session", args=[agent_id, session_id])


def get_urls(c) -> list[str]:
    """Every page of the dashboard, for one `conversation`."""
    return [
        reverse("dashboard"),
        reverse("sessions"),
        reverse("search") + "?q=gunicorn",
        session_url(),
        reverse("subagent_run", args=[c.ask.pk]),
        reverse("memories"),
        reverse("memory", args=[c.tea.pk]),
        reverse("memory_history", args=[c.tea.pk]),
        reverse("memory_edit", args=[c.tea.pk]),
        reverse("memory_delete", args=[c.tea.pk]),
    ]


def post_urls(c) -> list[str]:
    return [
        reverse("context_preview", args=["agent-a", "s-1"]),
        reverse("memory_edit", args=[c.tea.pk]),
        reverse("memory_expire", args=[c.tea.pk]),
        reverse("memory_restore", args=[c.tea.pk]),
        reverse("memory_delete", args=[c.tea.pk]),
    ]


def test_it_requires_a_login_everywhere(client, conversation):
    for url in get_urls(conversation) + post_urls(conversation):
        for send in (client.get, client.post):
            response = send(url)
            assert response.status_code == 302, url
            assert response["Location"].startswith(f"{reverse('login')}?next=")
    assert LongTermMemory.objects.filter(pk=conversation.tea.pk, expires_at=None).exists()


def test_it_signs_in_and_out(client, admin_user):
    response = client.post(reverse("login"), {"username": "admin", "password": "password"})
    assert response.status_code == 302
    assert response["Location"] == reverse("dashboard")
    assert client.get(reverse("dashboard")).status_code == 200
    assert client.post(reverse("logout")).status_code == 302
    assert client.get(reverse("dashboard")).status_code == 302


def test_it_refuses_posts_without_csrf_token(admin_user, conversation):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    for url in post_urls(conversation):
        assert client.post(url, headers=HTMX).status_code == 403, url
    assert LongTermMemory.objects.filter(pk=conversation.tea.pk, expires_at=None).exists()
    assert not LongTermMemoryHistory.objects.filter(actor__startswith="ui:").exists()


def test_it_accepts_the_token_htmx_sends_in_a_header(admin_user, conversation):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    page = client.get(reverse("memories"))
    token = page.cookies["csrftoken"].value
    assert f'"X-CSRFToken": "{page.context["csrf_token"]}"' in page.content.decode()
    url = reverse("memory_expire", args=[conversation.tea.pk])
    response = client.post(url, headers={**HTMX, "X-CSRFToken": token})
    assert response.status_code == 200
    conversation.tea.refresh_from_db()
    assert conversation.tea.is_expired()


def test_every_page_is_whole_without_htmx_and_a_fragment_with_it(admin_client, conversation):
    # Nothing on the dashboard swaps; htmx confirms a deletion in the browser, not by a page.
    whole_only = {reverse("dashboard"), reverse("memory_delete", args=[conversation.tea.pk])}
    for url in set(get_urls(conversation)) - whole_only:
        page = admin_client.get(url)
        fragment = admin_client.get(url, headers=HTMX)
        assert page.status_code == fragment.status_code == 200, url
        assert "<html" in page.content.decode(), url
        assert "<html" not in fragment.content.decode(), url
        assert "HX-Request" in fragment["Vary"]


def test_a_history_restore_gets_the_whole_page(admin_client, conversation):
    headers = {**HTMX, "HX-History-Restore-Request": "true"}
    response = admin_client.get(reverse("sessions"), headers=headers)
    assert "<html" in response.content.decode()


def test_the_dashboard_counts_and_explains_health(admin_client, conversation):
    LongTermMemory.objects.create(
        agent_id="agent-a", content="old", memory_type="fact", archived_at=timezone.now()
    )
    memory_expire(conversation.deploy, actor="api")
    response = admin_client.get(reverse("dashboard"))
    assert response.status_code == 200
    body = response.content.decode()
    assert response.context["counts"] == {"sessions": 1, "messages": 3, "summaries": 1}
    # What the memory list's "active" state shows: neither archived nor expired.
    assert ("fact", "Fact", 0) in response.context["memory_counts"]
    assert ("preference", "Preference", 1) in response.context["memory_counts"]
    assert ("decision", "Decision", 0) in response.context["memory_counts"]
    assert "Embeddings are off ([embedding] provider = none)" in body
    # Nothing will write vectors: no backlog, no "waiting" and vector search said to be off.
    assert "waiting for a vector" not in body
    assert "Vector search</dt>\n    <dd>off" in body
    assert session_url() in body


def test_the_dashboard_says_when_the_provider_fails(admin_client, fake_embedder):
    from memory.models import VectorIndexState

    VectorIndexState.objects.create(
        pk=1,
        provider="fake",
        model="hashed-words",
        dimension=64,
        last_error="connection refused",
        last_error_at=timezone.now(),
        consecutive_failures=3,
    )
    response = admin_client.get(reverse("dashboard"))
    body = response.content.decode()
    assert response.context["health"].status == "degraded"
    assert "Embedding is failing: the last attempt (" in body
    assert "said “connection refused”" in body


def test_sessions_search_filter_and_paginate(admin_client, conversation):
    start = timezone.now() - timedelta(days=1)
    for n in range(30):
        at = start + timedelta(minutes=n)
        message_add(
            agent_id="agent-b", session_id=f"b-{n:02}", role="user", content="hi", timestamp=at
        )
    message_add(agent_id="agent-b", session_id="b-tea", role="user", content="I like Oolong tea")

    page = admin_client.get(reverse("sessions"))
    assert page.context["page"].paginator.count == 32
    assert "page 1 of 2" in page.content.decode()

    second = admin_client.get(reverse("sessions"), {"page": 2, "agent": "agent-b"}, headers=HTMX)
    assert [s["session_id"] for s in second.context["page"]] == [
        "b-05",
        "b-04",
        "b-03",
        "b-02",
        "b-01",
        "b-00",
    ]

    by_text = admin_client.get(reverse("sessions"), {"q": "oolong"})
    assert [s["session_id"] for s in by_text.context["page"]] == ["b-tea"]
    by_id = admin_client.get(reverse("sessions"), {"q": "S-1"})
    assert [s["session_id"] for s in by_id.context["page"]] == ["s-1"]
    by_agent = admin_client.get(reverse("sessions"), {"agent": "agent-a"})
    assert [(s["agent_id"], s["message_count"]) for s in by_agent.context["page"]] == [
        ("agent-a", 3)
    ]


def test_the_session_page_shows_the_timeline_and_summaries(
    admin_client, conversation, fake_embedder
):
    response = admin_client.get(session_url())
    body = response.content.decode()
    assert [m.pk for m in response.context["timeline"]] == [
        conversation.ask.pk,
        conversation.result.pk,
        conversation.reply.pk,
    ]
    assert f"{conversation.ask.token_count} tokens" in body
    assert "waiting for vector" in body  # a provider is configured: it will write them
    assert "not embedded" in body  # the tool message is never embedded
    assert conversation.summary.content in body
    # The sub-agent result unfolds into its transcript, fetched by htmx.
    run_url = reverse("subagent_run", args=[conversation.ask.pk]) + "?agent=researcher"
    assert f'hx-get="{run_url}"' in body
    assert f'href="{run_url}"' in body


def test_without_an_embedding_provider_no_message_waits_for_a_vector(admin_client, conversation):
    body = admin_client.get(session_url()).content.decode()

    assert "waiting for vector" not in body and "not embedded" not in body
    sessions = admin_client.get(reverse("sessions")).content.decode()
    assert "by their words," in sessions and "meaning" not in sessions
    search = admin_client.get(reverse("search")).content.decode()
    assert "by their words" in search and "meaning" not in search


def test_with_a_provider_whose_vectors_are_not_ready_search_is_said_to_go_by_words(
    admin_client, conversation, fake_embedder
):
    """A provider is configured, but no vector index is built for it yet: search answers by
    words only, and the pages say so rather than "by meaning"."""
    assert not vector_search_status().enabled
    sessions = admin_client.get(reverse("sessions")).content.decode()
    assert "by their words," in sessions and "meaning" not in sessions
    rebuild_index(fake_embedder.signature)  # what the task worker does on its first run
    assert vector_search_status().enabled
    sessions = admin_client.get(reverse("sessions")).content.decode()
    assert "by their words and meaning" in sessions
    search = admin_client.get(reverse("search")).content.decode()
    assert "by words and meaning" in search


def test_an_unknown_session_is_404(admin_client, conversation):
    assert admin_client.get(session_url("agent-a", "nope")).status_code == 404
    assert admin_client.get(session_url("agent-b", "s-1")).status_code == 404


def test_session_ids_with_odd_characters_have_working_links(admin_client):
    message_add(agent_id="a b", session_id="what? #1 100%", role="user", content="hi")
    url = session_url("a b", "what? #1 100%")
    assert "%3F" in url and "%23" in url
    assert url in admin_client.get(reverse("sessions")).content.decode()
    assert admin_client.get(url).status_code == 200


def test_the_subagent_page_shows_the_isolated_transcript(admin_client, conversation):
    url = reverse("subagent_run", args=[conversation.ask.pk])
    response = admin_client.get(url, {"agent": "researcher"}, headers=HTMX)
    body = response.content.decode()
    assert "researcher" in body
    assert "Reading gunicorn docs." in body
    assert "result truncated from 13500 tokens" in body
    assert conversation.result.content.endswith("[内容已截断]")
    assert "[内容已截断]" in body
    assert admin_client.get(url, {"agent": "nobody"}).context["runs"] == []


def test_the_context_preview_shows_each_layer(admin_client, conversation):
    url = reverse("context_preview", args=["agent-a", "s-1"])
    response = admin_client.post(url, {"query": "green tea", "model_window": 8192}, headers=HTMX)
    body = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in body
    built = response.context["built"]
    assert built.budget == 4915
    assert [i.id for i in built.layers["long_term"].items][0] == conversation.tea.pk
    assert f"{built.layers['working'].used} / {built.layers['working'].budget} tokens" in body
    assert "Long-term memory" in body and "score 1.000" in body
    assert "access count raised by one" in body
    conversation.tea.refresh_from_db()
    assert conversation.tea.access_count == 1

    whole = admin_client.post(url, {"query": "", "model_window": 8192})
    assert "<html" in whole.content.decode() and whole.context["built"].window == 8192


def test_the_context_preview_refuses_a_bad_window(admin_client, conversation):
    url = reverse("context_preview", args=["agent-a", "s-1"])
    response = admin_client.post(url, {"query": "tea", "model_window": 10}, headers=HTMX)
    assert response.status_code == 200
    assert "built" not in response.context
    assert "greater than or equal to 256" in response.content.decode()
    conversation.tea.refresh_from_db()
    assert conversation.tea.access_count == 0


def test_memories_filter_by_agent_type_state_and_text(admin_client, conversation):
    memory_expire(conversation.deploy, actor="api")

    def ids(**filters) -> list[int]:
        response = admin_client.get(reverse("memories"), filters, headers=HTMX)
        return [m.pk for m in response.context["page"]]

    tea, deploy = conversation.tea.pk, conversation.deploy.pk
    assert ids() == [deploy, tea]
    assert ids(agent="agent-a") == [tea]
    assert ids(memory_type="decision") == [deploy]
    assert ids(state="expired") == [deploy]
    assert ids(state="active") == [tea]
    assert ids(q="GREEN") == [tea]
    assert ids(agent="unknown-agent") == [deploy, tea]  # not a choice: ignored


def test_the_memory_page_shows_its_history(admin_client, conversation):
    memory_expire(conversation.tea, actor="admin:root")
    body = admin_client.get(reverse("memory", args=[conversation.tea.pk])).content.decode()
    assert "<strong>expired</strong> by root (admin)" in body
    assert "<strong>created</strong> by API" in body
    fragment = admin_client.get(reverse("memory_history", args=[conversation.tea.pk]), headers=HTMX)
    assert "expired</strong> by root (admin)" in fragment.content.decode()


def test_it_edits_a_memory_inline(admin_client, conversation):
    url = reverse("memory_edit", args=[conversation.tea.pk])
    form = admin_client.get(url, headers=HTMX)
    assert 'name="confidence"' in form.content.decode()
    data = {
        "content": "The user prefers oolong tea.",
        "memory_type": "preference",
        "confidence": "0.9",
        "expires_at": "",
    }
    response = admin_client.post(url, data, headers=HTMX)
    assert response.status_code == 200
    body = response.content.decode()
    assert "The user prefers oolong tea." in body and 'id="memory-' in body
    assert "<html" not in body
    memory = LongTermMemory.objects.get(pk=conversation.tea.pk)
    assert (memory.content, memory.confidence, memory.has_embedding) == (
        "The user prefers oolong tea.",
        0.9,
        False,
    )
    change = LongTermMemoryHistory.objects.filter(memory_id=memory.pk).latest("id")
    assert (change.action, change.actor) == ("update", "ui:admin")
    assert (change.old_content, change.new_content) == (
        "The user prefers green tea.",
        "The user prefers oolong tea.",
    )
    assert change.changes == {"confidence": 0.9}
    assert change.old_values == {"confidence": 0.7}


def test_an_edit_leaves_untouched_fields_alone(admin_client, conversation):
    expires_at = timezone.now() + timedelta(days=3, seconds=17)
    LongTermMemory.objects.filter(pk=conversation.tea.pk).update(expires_at=expires_at)
    url = reverse("memory_edit", args=[conversation.tea.pk])
    data = {
        "content": "The user prefers green tea.",
        "memory_type": "fact",
        "confidence": "0.7",
        "expires_at": f"{expires_at:%Y-%m-%dT%H:%M}",
    }
    response = admin_client.post(url, data)
    assert response.status_code == 302
    assert response["Location"] == reverse("memory", args=[conversation.tea.pk])
    memory = LongTermMemory.objects.get(pk=conversation.tea.pk)
    assert (memory.memory_type, memory.expires_at) == ("fact", expires_at)
    change = LongTermMemoryHistory.objects.filter(memory_id=memory.pk).latest("id")
    assert change.changes == {"memory_type": "fact"}


def test_an_invalid_edit_shows_the_form_again(admin_client, conversation):
    url = reverse("memory_edit", args=[conversation.tea.pk])
    data = {"content": "x\x00", "memory_type": "preference", "confidence": "2"}
    response = admin_client.post(url, data, headers=HTMX)
    assert response.status_code == 200
    body = response.content.decode()
    assert "confidence must be between 0 and 1" in body  # the field's validator
    assert "Null characters are not allowed" in body
    assert LongTermMemory.objects.get(pk=conversation.tea.pk).confidence == 0.7
    assert LongTermMemoryHistory.objects.filter(memory_id=conversation.tea.pk).count() == 1


def test_it_expires_and_restores_a_memory(admin_client, conversation):
    pk = conversation.tea.pk
    expired = admin_client.post(reverse("memory_expire", args=[pk]), headers=HTMX)
    assert "Restore" in expired.content.decode()
    assert LongTermMemory.objects.get(pk=pk).is_expired()

    restored = admin_client.post(reverse("memory_restore", args=[pk]))
    assert restored.status_code == 302
    assert LongTermMemory.objects.get(pk=pk).expires_at is None
    history = LongTermMemoryHistory.objects.filter(memory_id=pk).order_by("id")
    assert [(h.action, h.actor) for h in history] == [
        ("create", "api"),
        ("expire", "ui:admin"),
        ("restore", "ui:admin"),
    ]
    restore = history.last()
    assert restore.changes == {"expires_at": None}
    assert restore.old_values == {"expires_at": history[1].changes["expires_at"]}
    body = admin_client.get(reverse("memory", args=[pk])).content.decode()
    assert "<strong>restored</strong> by admin (dashboard)" in body
    assert "<strong>edited</strong>" not in body


def test_it_deletes_a_memory_after_confirmation(admin_client, conversation):
    url = reverse("memory_delete", args=[conversation.tea.pk])
    confirm = admin_client.get(url)
    assert "Delete memory #" in confirm.content.decode()
    assert LongTermMemory.objects.filter(pk=conversation.tea.pk).exists()

    response = admin_client.post(url, headers=HTMX)
    assert (response.status_code, response.content) == (200, b"")
    assert response["HX-Trigger"] == "memories-changed"  # the list reloads: its count too
    assert not LongTermMemory.objects.filter(pk=conversation.tea.pk).exists()
    change = LongTermMemoryHistory.objects.filter(memory_id=conversation.tea.pk).latest("id")
    assert (change.action, change.actor, change.old_content) == (
        "delete",
        "ui:admin",
        "The user prefers green tea.",
    )

    deploy = reverse("memory_delete", args=[conversation.deploy.pk])
    response = admin_client.post(deploy, follow=True)
    assert response.redirect_chain == [(reverse("memories"), 302)]
    assert "deleted; its history is kept" in response.content.decode()


def test_mutations_refuse_get(admin_client, conversation):
    for name in ("memory_expire", "memory_restore"):
        assert admin_client.get(reverse(name, args=[conversation.tea.pk])).status_code == 405
    assert admin_client.get(reverse("context_preview", args=["agent-a", "s-1"])).status_code == 405


def test_content_is_escaped_everywhere(admin_client, conversation):
    message = message_add(agent_id="agent-a", session_id="s-1", role="user", content=XSS)
    LongTermMemory.objects.filter(pk=conversation.tea.pk).update(content=XSS)
    from subagents.runs import subagent_record

    subagent_record(parent=message, agent_name="x", role="assistant", content=XSS)
    for url in (
        session_url(),
        reverse("memories"),
        reverse("memory", args=[conversation.tea.pk]),
        reverse("subagent_run", args=[message.pk]),
    ):
        body = admin_client.get(url).content.decode()
        assert ESCAPED in body, url
        assert XSS not in body, url


def test_long_content_is_folded(admin_client, conversation):
    long = "word " * 200
    MainMessage.objects.filter(pk=conversation.reply.pk).update(content=long)
    body = admin_client.get(session_url()).content.decode()
    assert '<details class="long-text">' in body
    assert "show all 1000 characters" in body
