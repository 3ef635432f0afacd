"""The inspector's session page: the context preview's explanation, the consolidation panel,
sub-agent markers, reading a long session. Through Django's test client."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.urls import reverse

from memory.memories import memory_create
from memory.messages import message_add
from memory.models import LongTermMemory, MainMessage
from tests.test_ui_views import ESCAPED, HTMX, XSS, session_url

pytestmark = pytest.mark.django_db


def preview(client, query: str, *, session_id: str = "s-1", window: int = 8192):
    url = reverse("context_preview", args=["agent-a", session_id])
    return client.post(url, {"query": query, "model_window": window}, headers=HTMX)


def test_the_preview_explains_each_layer_with_links_and_what_was_left_out(
    admin_client, conversation, django_assert_max_num_queries
):
    earlier = message_add(
        agent_id="agent-a", session_id="s-0", role="user", content="I brew green tea at seven."
    )
    lesser = [
        memory_create(
            agent_id="agent-a",
            content=f"note {n}: the office kitchen stocks green tea among many other drinks",
            memory_type="fact",
            actor="api",
        )
        for n in range(2)
    ]

    # 23 reads (the session's summaries matched by text, then the matches read, among them;
    # the roles of the recall's candidates, one for all, so that the agent's replies weigh
    # less; the chosen memories' sources, one for all) and the memories' access count, a
    # best-effort write of 5 statements (its savepoint, and SQLite's busy timeout lowered
    # then restored: outage.best_effort).
    with django_assert_max_num_queries(28):
        response = preview(admin_client, "green tea")

    body = response.content.decode()
    assert response.status_code == 200
    rows = response.context["layers"]
    assert [row["name"] for row in rows] == ["long_term", "recall", "short_term", "working"]
    # The overview table leads: each layer's budget, use, method.
    assert '<table class="layers">' in body
    assert body.index('<table class="layers">') < body.index('id="layer-long_term"')
    long_term = rows[0]
    assert [item.id for item, _ in long_term["items"]][0] == conversation.tea.pk
    assert f'href="{reverse("memory", args=[conversation.tea.pk])}"' in body
    # The two lesser matches did not make the top 2: listed, linked, with why and a score.
    left = {left.id: (left.reason, url) for left, url in long_term["left_out"]}
    outranked = [m.pk for m in lesser if m.pk in left]
    assert len(outranked) == 1
    for pk in outranked:
        assert left[pk] == ("ranked below the 2 chosen", reverse("memory", args=[pk]))
        assert f"#{pk}</a>: ranked below the 2 chosen" in body
    # A recalled message links to its place inside its session's page.
    recalled = {item.id: url for item, url in rows[1]["items"]}
    at_earlier = (
        reverse("session", args=["agent-a", "s-0"]) + f"?at={earlier.pk}#message-{earlier.pk}"
    )
    assert recalled[earlier.pk] == at_earlier
    assert f'href="{at_earlier}"' in body
    working = {item.id: url for item, url in rows[3]["items"]}
    assert working[conversation.reply.pk].endswith(
        f"?at={conversation.reply.pk}#message-{conversation.reply.pk}"
    )
    # The messages as sent, as JSON.
    sent = json.loads(response.context["messages_json"])
    assert sent == response.context["built"].messages
    assert sent[0]["role"] == "system" and "green tea" in sent[0]["content"]
    assert 'id="messages-json"' in body and 'data-copy="#messages-json"' in body
    for memory in (conversation.tea, *lesser):
        memory.refresh_from_db()
    assert conversation.tea.access_count == 1
    assert all(m.access_count == (0 if m.pk in outranked else 1) for m in lesser)


def test_the_preview_names_the_identity_rule(admin_client, conversation):
    response = preview(admin_client, "do you remember me?")
    assert response.context["built"].identity_recall
    assert "Identity rule: the query asks about the user" in response.content.decode()


def test_the_preview_escapes_what_it_shows(admin_client, conversation):
    LongTermMemory.objects.filter(pk=conversation.tea.pk).update(content=f"green tea {XSS}")
    body = preview(admin_client, "green tea").content.decode()
    assert ESCAPED in body and XSS not in body
    # The JSON too: its quotes and brackets are escaped inside the <pre>.
    assert "&quot;role&quot;: &quot;system&quot;" in body


def test_a_link_to_a_message_opens_the_page_that_holds_it(admin_client, conversation):
    many = [
        message_add(agent_id="agent-a", session_id="s-1", role="user", content=f"line {n}")
        for n in range(150)
    ]
    for message, page in ((many[0], 1), (many[120], 2), (many[-1], 2)):
        response = admin_client.get(session_url(), {"at": message.pk})
        assert response.context["page"].number == page
        assert f'id="message-{message.pk}"' in response.content.decode()
    # An explicit page wins; a message of another session, or no number, is the first page.
    assert (
        admin_client.get(session_url(), {"at": many[-1].pk, "page": 1}).context["page"].number == 1
    )
    other = message_add(agent_id="agent-a", session_id="s-2", role="user", content="elsewhere")
    for at in (other.pk, "x", "9" * 40):
        response = admin_client.get(session_url(), {"at": at})
        assert (response.status_code, response.context["page"].number) == (200, 1)


# --- the consolidation panel --------------------------------------------------------------


def test_the_session_shows_its_consolidation_runs_and_their_memories(
    admin_client, conversation, django_assert_max_num_queries
):
    from memory.memories import memory_delete
    from memory.models import ConsolidationRun
    from tests.factories import consolidate_session

    empty = admin_client.get(session_url())
    assert empty.context["consolidation"] == []
    assert "Not consolidated yet" in empty.content.decode()

    message_add(
        agent_id="agent-a", session_id="s-1", role="user", content="I am allergic to peanuts."
    )
    message_add(agent_id="agent-a", session_id="s-1", role="user", content="I live in Lisbon.")
    first = consolidate_session(agent_id="agent-a", session_id="s-1")
    assert (first.status, first.created) == ("done", 2)
    made = list(LongTermMemory.objects.filter(source_session="s-1").order_by("id"))
    memory_delete(made[1], actor="api")
    # Another run (after the agent's 30-second window) confirms the first memory.
    ConsolidationRun.objects.filter(pk=first.pk).update(
        started_at=first.started_at.replace(year=2020),
        finished_at=first.finished_at.replace(year=2020),
    )
    message_add(
        agent_id="agent-a", session_id="s-1", role="user", content="I am allergic to peanuts!"
    )
    second = consolidate_session(agent_id="agent-a", session_id="s-1")
    assert (second.status, second.created, second.merged) == ("done", 0, 1)
    failed = ConsolidationRun.objects.create(
        agent_id="agent-a", session_id="s-1", trigger="turns", status="failed", reason=f"boom {XSS}"
    )

    with django_assert_max_num_queries(12):
        response = admin_client.get(session_url())

    body = response.content.decode()
    runs = response.context["consolidation"]
    assert [entry.run.pk for entry in runs] == [failed.pk, second.pk, first.pk]
    assert [(pk, m.pk if m else None) for pk, m in runs[2].created] == [
        (made[0].pk, made[0].pk),
        (made[1].pk, None),  # deleted since: its page keeps the history
    ]
    assert [pk for pk, _ in runs[1].merged] == [made[0].pk]
    assert (
        f'<a href="{reverse("memory", args=[made[1].pk])}">#{made[1].pk}</a> <span class="muted">(deleted)</span>'
        in body
    )
    assert f'merged into <a href="{reverse("memory", args=[made[0].pk])}">' in body
    assert '<span class="badge status-failed">failed</span>' in body
    assert f"boom {ESCAPED}" in body
    assert "2 created · 0 merged" in body and "0 created · 1 merged" in body
    # What asked for each run, in words (models.Trigger's labels).
    assert body.count("at the session&#x27;s end") == 2 and body.count("after 20 turns") == 1
    chinese = admin_client.get(session_url(), headers={"Accept-Language": "zh-hans"})
    assert chinese.content.decode().count("会话结束时") == 2


def test_the_consolidation_panel_needs_its_permission(client, conversation):
    from django.contrib.auth.models import Permission, User

    user = User.objects.create_user("ann", password="pw")
    names = ["view_mainmessage", "view_shorttermmemory"]
    user.user_permissions.set(Permission.objects.filter(codename__in=names))
    client.force_login(user)
    response = client.get(session_url())
    assert response.status_code == 200
    assert response.context["consolidation"] is None
    assert 'id="consolidation"' not in response.content.decode()


# --- sub-agent runs -----------------------------------------------------------------------


def test_a_message_that_started_runs_links_each_finished_or_not(
    admin_client, conversation, django_assert_max_num_queries
):
    from subagents.runs import subagent_record

    subagent_record(
        parent=conversation.ask, agent_name="checker", role="assistant", content="Still checking."
    )
    with django_assert_max_num_queries(12):
        response = admin_client.get(session_url())
    body = response.content.decode()
    timeline = {m.pk: m for m in response.context["timeline"]}
    base = reverse("subagent_run", args=[conversation.ask.pk])
    assert timeline[conversation.ask.pk].started_runs == [
        ("checker", False, f"{base}?agent=checker"),
        ("researcher", True, f"{base}?agent=researcher"),
    ]
    assert timeline[conversation.reply.pk].started_runs == []
    assert "started 2 sub-agent runs" in body
    assert (
        f'<a href="{base}?agent=checker">checker</a> <span class="badge wait">running</span>'
        in body
    )
    assert (
        f'<a href="{base}?agent=researcher">researcher</a> <span class="badge ok">finished</span>'
        in body
    )
    # The unfinished run's page answers, with its replies.
    run_page = admin_client.get(f"{base}?agent=checker")
    assert "Still checking." in run_page.content.decode()


def test_the_session_list_flags_sessions_with_runs(
    admin_client, conversation, django_assert_max_num_queries
):
    from subagents.runs import subagent_record

    quiet = message_add(agent_id="agent-a", session_id="s-quiet", role="user", content="hello")
    busy = message_add(
        agent_id="agent-b", session_id="s-1", role="user", content="same id, other agent"
    )
    subagent_record(parent=busy, agent_name="a", role="assistant", content="working")
    subagent_record(parent=busy, agent_name="b", role="assistant", content="working")
    subagent_record(parent=busy, agent_name="c", role="assistant", content="working")
    with django_assert_max_num_queries(10):
        response = admin_client.get(reverse("sessions"))
    runs = {(r["agent_id"], r["session_id"]): r["subagent_runs"] for r in response.context["rows"]}
    assert runs == {("agent-a", "s-1"): 1, ("agent-a", quiet.session_id): 0, ("agent-b", "s-1"): 3}
    body = response.content.decode()
    assert "1 sub-agent run</span>" in body and "3 sub-agent runs</span>" in body
    dashboard = admin_client.get(reverse("dashboard")).content.decode()
    assert "3 sub-agent runs</span>" in dashboard


# --- reading a long session ---------------------------------------------------------------


def long_session(count: int = 250) -> list:
    from datetime import timedelta

    from django.utils import timezone

    start = timezone.now() - timedelta(days=1)
    return [
        message_add(
            agent_id="agent-a",
            session_id="long",
            role="user" if n % 2 == 0 else "assistant",
            msg_type="fact" if n % 50 == 7 else "normal",
            content=f"line {n}" + (" about kayaks" if n % 40 == 3 else ""),
            timestamp=start + timedelta(seconds=n),
            summarize=False,
        )
        for n in range(count)
    ]


def ids(response) -> list[int]:
    return [m.pk for m in response.context["timeline"]]


def test_a_long_session_reads_newest_first_with_numbered_pages_and_jumps(
    admin_client, django_assert_max_num_queries
):
    rows = long_session()
    url = session_url("agent-a", "long")

    with django_assert_max_num_queries(12):
        oldest = admin_client.get(url)
    assert ids(oldest) == [m.pk for m in rows[:100]]
    assert (oldest.context["oldest_page"], oldest.context["newest_page"]) == (1, 3)
    body = oldest.content.decode()
    assert body.count('aria-label="top pages"') == body.count('aria-label="bottom pages"') == 1
    assert '<span class="current" aria-current="page">1</span>' in body
    assert 'href="?page=3#timeline-end"' in body  # newest: the last page, at its end
    assert 'href="?page=2#timeline"' in body

    newest = admin_client.get(url, {"order": "newest"})
    assert ids(newest) == [m.pk for m in reversed(rows[150:])]
    assert (newest.context["oldest_page"], newest.context["newest_page"]) == (3, 1)
    assert "250 messages, newest first" in newest.content.decode()
    assert 'href="?order=newest&amp;page=3#timeline"' in newest.content.decode()

    # ?at= finds the page in the order shown.
    assert admin_client.get(url, {"at": rows[10].pk}).context["page"].number == 1
    assert admin_client.get(url, {"at": rows[10].pk, "order": "newest"}).context["page"].number == 3
    fragment = admin_client.get(url, {"page": 2}, headers=HTMX)
    assert "<html" not in fragment.content.decode()
    assert ids(fragment) == [m.pk for m in rows[100:200]]


def test_a_session_filters_by_role_type_and_text(admin_client, django_assert_max_num_queries):
    rows = long_session()
    url = session_url("agent-a", "long")

    with django_assert_max_num_queries(12):
        kayaks = admin_client.get(url, {"q": "KAYAKS"})
    assert ids(kayaks) == [m.pk for m in rows if "kayaks" in m.content]
    assert "7 of 250 messages match" in kayaks.content.decode()
    facts = admin_client.get(url, {"type": "fact", "role": "assistant"})
    assert ids(facts) == [m.pk for m in rows if m.msg_type == "fact" and m.role == "assistant"]
    both = admin_client.get(url, {"q": "kayaks", "role": "assistant", "order": "newest"})
    assert ids(both) == [
        m.pk for m in reversed(rows) if "kayaks" in m.content and m.role == "assistant"
    ]
    none = admin_client.get(url, {"q": "no such words"})
    assert (
        none.status_code == 200 and "No message of this session matches." in none.content.decode()
    )
    # Values it does not know are ignored; hostile text is searched for, escaped, never a 500.
    odd = admin_client.get(url, {"role": "robot", "type": "x", "order": "sideways"})
    assert ids(odd) == [m.pk for m in rows[:100]]
    for text in (XSS, "a\x00b", "%_'\""):
        response = admin_client.get(url, {"q": text})
        assert response.status_code == 200
        assert XSS not in response.content.decode()
    # A filtered page of an unknown session is still a 404.
    assert admin_client.get(session_url("agent-a", "nope"), {"q": "x"}).status_code == 404


# --- the search page ----------------------------------------------------------------------


def test_search_finds_messages_of_every_agent_with_marked_snippets_and_links(
    admin_client, django_assert_max_num_queries
):
    from datetime import datetime, timedelta

    from django.utils import timezone

    day = timezone.make_aware(datetime(2026, 5, 8, 12, 0))
    a = message_add(
        agent_id="agent-a",
        session_id="s1",
        role="user",
        content=f"My kayak is red {XSS}",
        timestamp=day,
    )
    b = message_add(
        agent_id="agent-b",
        session_id="s9",
        role="assistant",
        content="Kayaks float.",
        timestamp=day + timedelta(days=3),
    )
    message_add(agent_id="agent-b", session_id="s8", role="user", content="nothing here")
    zh = message_add(agent_id="agent-c", session_id="z", role="user", content="我的偏好是绿茶")

    # Each agent is searched alone (3 here); the queries do not grow with the hits. PostgreSQL
    # first counts the agent's rows and the query's terms (index_postgres._scope_counts): two
    # more for each agent searched.
    most = 17 if connection.vendor == "sqlite" else 17 + 2 * 3
    with django_assert_max_num_queries(most):
        response = admin_client.get(reverse("search"), {"q": "kayak"})
    body = response.content.decode()
    assert response.status_code == 200
    assert sorted(hit.message.pk for hit, *_ in response.context["hits"]) == [a.pk, b.pk]
    assert "<mark>kayak</mark> is red " + ESCAPED in body and XSS not in body
    assert "<mark>Kayak</mark>s float." in body
    link = reverse("session", args=["agent-a", "s1"]) + f"?at={a.pk}#message-{a.pk}"
    assert f'href="{link}"' in body

    def found(**query) -> list[int]:
        response = admin_client.get(reverse("search"), query)
        assert response.status_code == 200, response.content
        return sorted(hit.message.pk for hit, *_ in response.context.get("hits", []))

    assert found(q="kayak float") == sorted([a.pk, b.pk])
    assert found(q="kayak float", agent="agent-b") == [b.pk]
    assert found(q="kayak float", role="assistant") == [b.pk]
    assert found(q="kayak float", session="s1") == [a.pk]
    assert found(q="kayak float", since="2026-05-09") == [b.pk]
    assert found(q="kayak float", until="2026-05-08") == [a.pk]
    assert found(q="kayak float", mode="lexical", type="fact") == []
    assert found(q="偏好") == [zh.pk]
    assert (
        "<mark>偏好</mark>" in admin_client.get(reverse("search"), {"q": "偏好"}).content.decode()
    )
    fragment = admin_client.get(reverse("search"), {"q": "kayak"}, headers=HTMX)
    assert "<html" not in fragment.content.decode() and 'id="results"' in fragment.content.decode()


def test_search_refuses_what_it_cannot_search_without_a_500(admin_client):
    message_add(agent_id="agent-a", session_id="s1", role="user", content="kayak")
    intro = admin_client.get(reverse("search"))
    assert intro.status_code == 200 and "hits" not in intro.context
    for query in (
        {"q": ""},
        {"q": "a\x00b"},
        {"q": "kayak", "since": "2026-05-09", "until": "2026-05-08"},
        {"q": "kayak", "since": "yesterday"},
        {"q": "kayak", "mode": "psychic"},
        {"q": "x" * 1001},
    ):
        response = admin_client.get(reverse("search"), query)
        assert response.status_code == 200, query
        assert "hits" not in response.context, query
        assert 'class="error"' in response.content.decode(), query


# --- the session list ---------------------------------------------------------------------


def test_the_session_list_filters_by_dates_sorts_and_shows_its_columns(
    admin_client, django_assert_max_num_queries
):
    from datetime import datetime, timedelta

    from django.utils import timezone

    from memory.consolidation import request_consolidation
    from memory.models import ConsolidationRun

    def session(agent: str, name: str, start: datetime, minutes: list[int], words: int = 3):
        for minute in minutes:
            message_add(
                agent_id=agent,
                session_id=name,
                role="user",
                content=" ".join(["word"] * words),
                timestamp=start + timedelta(minutes=minute),
            )

    may = timezone.make_aware(datetime(2026, 5, 8, 9, 0))
    session("agent-a", "short", may, [0, 1])
    session("agent-a", "long", may + timedelta(days=1), [0, 90, 95], words=40)
    session("agent-b", "late", may + timedelta(days=3), [0])
    # Ending the session asks for a consolidation, which the tests' task backend runs at once.
    ended = request_consolidation(agent_id="agent-a", session_id="long", trigger="session_end")
    ConsolidationRun.objects.create(
        agent_id="agent-a", session_id="short", trigger="turns", status="done"
    )

    def listed(**query) -> list[str]:
        response = admin_client.get(reverse("sessions"), query)
        assert response.status_code == 200
        return [row["session_id"] for row in response.context["rows"]]

    assert listed() == ["late", "long", "short"]
    assert listed(sort="start") == ["short", "long", "late"]
    assert listed(sort="-duration") == ["long", "short", "late"]
    assert listed(sort="-tokens")[0] == "long"
    assert listed(sort="-messages")[0] == "long"
    assert listed(agent="agent-a", sort="last") == ["short", "long"]
    assert listed(since="2026-05-09") == ["late", "long"]
    assert listed(until="2026-05-09") == ["long", "short"]
    assert listed(since="2026-05-09", until="2026-05-09") == ["long"]
    assert listed(since="not a day") == ["late", "long", "short"]  # ignored

    with django_assert_max_num_queries(10):
        response = admin_client.get(reverse("sessions"), {"sort": "-duration"})
    rows = {row["session_id"]: row for row in response.context["rows"]}
    assert rows["long"]["duration"] == timedelta(minutes=95)
    assert rows["long"]["token_count"] == sum(
        m.token_count for m in MainMessage.objects.filter(session_id="long")
    )
    assert ConsolidationRun.objects.get(pk=ended.pk).status == "done"
    assert (rows["long"]["ended"], rows["long"]["consolidated"]) == (True, True)
    assert (rows["late"]["ended"], rows["late"]["consolidated"]) == (False, False)
    assert (rows["short"]["ended"], rows["short"]["consolidated"]) == (False, True)
    body = response.content.decode()
    assert "1\xa0hour, 35\xa0minutes" in body  # Django's timeuntil keeps each figure with its unit
    assert '<span class="badge">ended</span>' in body
    assert '<span class="badge ok">consolidated</span>' in body

    bad = admin_client.get(reverse("sessions"), {"sort": "-mood"})
    assert bad.status_code == 400
    assert "Unknown sort “-mood”." in bad.content.decode()
    assert [row["session_id"] for row in bad.context["rows"]] == ["late", "long", "short"]


def test_search_and_the_session_pages_need_the_viewers_permissions(client, conversation):
    from django.contrib.auth.models import Permission, User

    from tests.test_ui_browser_roles import dashboard_group

    memories_only = User.objects.create_user("mo", password="pw")
    memories_only.user_permissions.set(Permission.objects.filter(codename="view_longtermmemory"))
    client.force_login(memories_only)
    for url in (reverse("search") + "?q=tea", reverse("sessions"), session_url()):
        assert client.get(url).status_code == 403, url

    viewer = User.objects.create_user("vera", password="pw")
    viewer.groups.add(dashboard_group("orca viewers"))
    client.force_login(viewer)
    assert client.get(reverse("search"), {"q": "gunicorn"}).context["hits"]
    page = client.get(session_url())
    assert page.context["consolidation"] == []
    assert "started 1 sub-agent run" in page.content.decode()


def test_hostile_dates_and_numbers_never_make_a_500(admin_client, conversation):
    for url, query in (
        (reverse("sessions"), {"since": "0001-01-01", "until": "9999-12-31"}),
        (reverse("search"), {"q": "gunicorn", "since": "0001-01-01", "until": "9999-12-31"}),
        (session_url(), {"at": "²"}),
        (session_url(), {"at": "1" * 30, "page": "9" * 30}),
    ):
        response = admin_client.get(url, query)
        assert response.status_code == 200, (url, query)
    everything = admin_client.get(
        reverse("sessions"), {"since": "0001-01-01", "until": "9999-12-31"}
    )
    assert [row["session_id"] for row in everything.context["rows"]] == ["s-1"]
    found = admin_client.get(reverse("search"), {"q": "gunicorn", "until": "9999-12-31"})
    assert found.context["hits"]


def test_the_calendars_ends_work_in_a_time_zone_ahead_of_utc(admin_client, conversation, settings):
    settings.TIME_ZONE = "Asia/Shanghai"
    for url, query in (
        (reverse("sessions"), {"since": "0001-01-01", "until": "9999-12-31"}),
        (reverse("search"), {"q": "gunicorn", "since": "0001-01-01", "until": "9999-12-31"}),
    ):
        response = admin_client.get(url, query)
        assert response.status_code == 200, url
        assert response.context.get("rows") or response.context.get("hits"), url
