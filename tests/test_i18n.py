"""The dashboard in English and Simplified Chinese: Accept-Language, the language switch, the
same URLs in both, the API in English whatever a client asks; and the Chinese catalogue
complete (every English string of the code translated, nothing fuzzy)."""

from __future__ import annotations

import shutil

import pytest
from babel.messages.pofile import read_po
from django.conf import settings
from django.core.management import call_command
from django.test import override_settings
from django.urls import reverse

from memory.models import LongTermMemory

CATALOGUE = settings.BASE_DIR / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po"
ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-CN,zh;q=0.9,en;q=0.8"}
NAV_ZH = ("仪表盘", "会话", "搜索", "记忆", "管理后台")
# The folders whose text the dashboard shows (makemessages reads them).
TRANSLATED = ("memory", "orca_memory", "subagents", "templates")
NAV_EN = ("Dashboard", "Sessions", "Search", "Memories", "Admin")


def nav(body: str) -> str:
    return body[body.index("<nav>") : body.index("</nav>")]


@pytest.mark.django_db
def test_it_shows_english_by_default(admin_client, conversation):
    response = admin_client.get("/")
    body = response.content.decode()
    assert response.status_code == 200
    assert '<html lang="en">' in body
    assert all(label in nav(body) for label in NAV_EN)
    assert response["Content-Language"] == "en"
    # The switch offers the other language, named in it.
    assert 'name="language" value="zh-hans"' in body and "简体中文" in body
    assert LongTermMemory.objects.count() == 2


@pytest.mark.django_db
def test_it_honours_accept_language_with_chinese_labels_and_dates(admin_client, conversation):
    response = admin_client.get("/", **ZH)
    body = response.content.decode()
    assert response.status_code == 200
    assert '<html lang="zh-hans">' in body
    assert response["Content-Language"] == "zh-hans"
    assert all(label in nav(body) for label in NAV_ZH)
    assert "Dashboard" not in nav(body)
    assert "最近的会话" in body and "服务状态" in body
    # Dates in the Chinese form; the exact ISO time stays in `datetime`.
    started = conversation.ask.timestamp
    assert f"{started:%Y}年{started.month}月{started.day}日 {started:%H:%M} UTC" in body
    # The same addresses in both languages: no language prefix.
    assert f'href="{reverse("sessions")}"' in body and reverse("sessions") == "/sessions/"
    memory = admin_client.get(reverse("memory", args=[conversation.tea.pk]), **ZH)
    assert "置信度" in memory.content.decode()


@pytest.mark.django_db
def test_it_switches_language_by_the_form_and_keeps_it_in_a_cookie(admin_client, conversation):
    response = admin_client.post(
        reverse("set_language"), {"language": "zh-hans", "next": "/sessions/"}
    )
    assert response.status_code == 302 and response["Location"] == "/sessions/"
    assert response.cookies[settings.LANGUAGE_COOKIE_NAME].value == "zh-hans"
    # The cookie wins over the browser's Accept-Language.
    page = admin_client.get("/sessions/", HTTP_ACCEPT_LANGUAGE="en")
    assert "仪表盘" in nav(page.content.decode())
    back = admin_client.post(reverse("set_language"), {"language": "en", "next": "/"})
    assert back.cookies[settings.LANGUAGE_COOKIE_NAME].value == "en"
    assert "Dashboard" in nav(admin_client.get("/", **ZH).content.decode())
    assert LongTermMemory.objects.count() == 2


@pytest.mark.django_db
def test_it_translates_the_login_and_error_pages(client, admin_client):
    login = client.get(reverse("login"), **ZH)
    assert login.status_code == 200 and "<h1>登录</h1>" in login.content.decode()
    missing = admin_client.get(reverse("memory", args=[987654]), **ZH)
    body = missing.content.decode()
    assert missing.status_code == 404
    assert "没有记忆 #987654：它已被删除，或从未存在。" in body
    assert all(label in nav(body) for label in NAV_ZH)


@pytest.mark.django_db
def test_it_answers_the_api_in_english_whatever_the_accept_language(api):
    response = api.get("/memories/987654", HTTP_ACCEPT_LANGUAGE="zh-hans")
    english = api.get("/memories/987654")
    assert response.status_code == english.status_code == 404
    assert response.json() == english.json()
    assert response.json()["detail"].isascii()
    assert "Content-Language" not in response


def test_it_has_a_chinese_translation_for_every_msgid():
    with CATALOGUE.open("rb") as f:
        catalogue = read_po(f, locale="zh_Hans")
    assert catalogue.num_plurals == 1
    untranslated, fuzzy = [], []
    for message in catalogue:
        if not message.id:
            continue
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        if not all(strings):
            untranslated.append(message.id)
        if message.fuzzy:
            fuzzy.append(message.id)
    assert untranslated == [], "translate these in locale/zh_Hans/LC_MESSAGES/django.po"
    assert fuzzy == [], "check these translations and remove their fuzzy flag"
    # Placeholders as in the English (%(name)s), or the page would fail to render.
    problems = [(message.id, errors) for message, errors in catalogue.check()]
    assert problems == []


@pytest.mark.slow  # runs GNU gettext's xgettext
@pytest.mark.skipif(not shutil.which("xgettext"), reason="no xgettext: run `make messages` once")
def test_it_has_every_english_string_of_the_code_in_the_catalogue(tmp_path, monkeypatch):
    """makemessages over a copy of the code finds no string the committed catalogue lacks:
    a new English string fails here until `make messages` adds it and it is translated.
    (A copy: makemessages writes beside the code it reads, into the real catalogue.)"""
    for folder in TRANSLATED:
        shutil.copytree(settings.BASE_DIR / folder, tmp_path / folder)
    (tmp_path / "locale").mkdir()
    monkeypatch.chdir(tmp_path)
    with override_settings(LOCALE_PATHS=[tmp_path / "locale"]):
        call_command("makemessages", locale=["zh_Hans"], no_location=True, verbosity=0)
    with (tmp_path / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po").open("rb") as f:
        found = {(m.context, m.id if isinstance(m.id, str) else m.id[0]) for m in read_po(f)}
    with CATALOGUE.open("rb") as f:
        known = {(m.context, m.id if isinstance(m.id, str) else m.id[0]) for m in read_po(f)}
    assert found - known == set(), "run `make messages` and translate the new strings"
    assert known - found == set(), "strings no longer in the code: run `make messages`"
