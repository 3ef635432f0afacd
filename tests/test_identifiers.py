"""Identifiers (agent, session, sub-agent name): one rule everywhere one comes in, and the file
names made from them.

HOSTILE_IDS is the table of ids to refuse, GOOD_IDS of ids to accept; every surface that takes
an id (the API, create_api_key, migrate_jsonl, export_jsonl, the admin's forms, the importer's
lines) is tested against both. Add a finding as a row.
"""

from __future__ import annotations

import io
import json
import unicodedata
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import pytest
from django.contrib import admin
from django.core.management import CommandError, call_command
from django.test import RequestFactory

from memory import jsonl
from memory.models import ApiKey, LongTermMemory, MainMessage, ShortTermMemory
from memory.validation import InvalidInput, check_identifier
from orca_memory.core.files import MAX_NAME_BYTES, id_file_name, path_inside
from subagents.models import SubagentMessage

pytestmark = pytest.mark.django_db

# (id, why it is refused)
HOSTILE_IDS = [
    ("", "empty"),
    (".", "only dots: the current folder, and clients drop it from URLs"),
    ("..", "only dots: the parent folder (the backup wrote beside the database)"),
    ("...", "only dots"),
    ("a/b", "a path separator"),
    ("a\\b", "a path separator (Windows)"),
    ("tab\tid", "a control character"),
    ("new\nline", "a control character (forges log lines)"),
    ("del\x7f", "DEL"),
    ("nel\x85", "a C1 control character"),
    ("ls\u2028", "a line separator"),
    ("nul\x00", "NUL"),
    (" lead", "a leading space"),
    ("trail ", "a trailing space"),
    ("x" * 201, "201 bytes"),
    ("é" * 101, "202 bytes in 101 characters"),
    ("中" * 67, "201 bytes in 67 characters (600-byte names failed as file names)"),
    ("a\ud800b", "a lone surrogate: not valid UTF-8"),
    # Format characters (Unicode category Cf): bidirectional controls and invisible ones.
    ("s\u202e1", "U+202E RIGHT-TO-LEFT OVERRIDE: reverses the dashboard line it is shown on"),
    ("s\u202a1", "U+202A LEFT-TO-RIGHT EMBEDDING"),
    ("s\u2066x\u2069", "U+2066 LEFT-TO-RIGHT ISOLATE and U+2069 POP DIRECTIONAL ISOLATE"),
    ("s\u200f", "U+200F RIGHT-TO-LEFT MARK"),
    ("s\u200e1", "U+200E LEFT-TO-RIGHT MARK"),
    ("\u061cs", "U+061C ARABIC LETTER MARK"),
    ("s\u200b1", "U+200B ZERO WIDTH SPACE: looks like s1"),
    ("s\u200c1", "U+200C ZERO WIDTH NON-JOINER"),
    ("s\u200d1", "U+200D ZERO WIDTH JOINER"),
    (
        "\U0001f469\u200d\U0001f467",
        "an emoji sequence joined by U+200D: an id is compared, not read",
    ),
    ("s\u20601", "U+2060 WORD JOINER"),
    ("\ufeffs1", "U+FEFF, a byte-order mark read into an id"),
    ("s\u00ad1", "U+00AD SOFT HYPHEN: invisible where the line does not break"),
    ("s\U000e0041", "a tag character (U+E0041)"),
]
GOOD_IDS = [
    "a",
    "x" * 200,
    "é" * 100,
    "中" * 66,
    ".hidden",
    "a.b",
    "a..b",
    "a%FFb",  # a literal percent sign; the broken byte %FF in a URL is refused elsewhere
    "a:b",
    "~tilde",
    "Trip Planning",
    "会话-1",
    # Close to the format characters, and fine: visible, or part of how a script is written.
    "\u05e9\u05dc\u05d5\u05dd-1",  # Hebrew (right-to-left letters, no control)
    "\u0645\u0631\u062d\u0628\u0627",  # Arabic
    "caf\u00e9 e\u0301",  # e-acute, precomposed and with a combining accent (category Mn)
    "\u2764\ufe0f \U0001f642",  # an emoji with its variation selector (Mn), and one alone
    "a\u00a0b",  # a no-break space inside (Zs, visible as a space)
]
# Refused for their format characters (category Cf), a rule newer than some stored ids: what
# reads stored data (an export's filter, a context) still takes them.
FORMAT_CHARACTER_IDS = [
    value for value, _ in HOSTILE_IDS if any(unicodedata.category(c) == "Cf" for c in value)
]
# Sent in a URL path: those the URL can carry as one segment.
URL_HOSTILE = [value for value, _ in HOSTILE_IDS if "\ud800" not in value]


def refused(value: str) -> bool:
    try:
        check_identifier("session_id", value)
    except InvalidInput:
        return True
    return False


@pytest.mark.parametrize(("value", "why"), HOSTILE_IDS)
def test_the_identifier_rule_refuses_each_hostile_id(value, why):
    assert refused(value), why


@pytest.mark.parametrize("value", GOOD_IDS)
def test_the_identifier_rule_accepts_each_good_id(value):
    assert not refused(value)


def test_the_identifier_rule_refuses_what_is_not_text():
    for value in (None, 5, ["a"], b"a"):
        assert refused(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", URL_HOSTILE)
def test_the_api_refuses_each_hostile_session_id_and_stores_nothing(api, value):
    response = api.post(
        f"/sessions/{quote(value, safe='')}/messages", {"role": "user", "content": "x"}
    )
    # An empty or split segment matches no operation: 404. Every other one: 422.
    assert response.status_code == (404 if value == "" or "/" in value else 422), value
    assert not MainMessage.objects.exists()


@pytest.mark.parametrize("value", GOOD_IDS)
def test_the_api_accepts_each_good_session_id_and_lists_it_back(api, value):
    path = f"/sessions/{quote(value, safe='')}/messages"
    assert api.post(path, {"role": "user", "content": "x"}).status_code == 201
    assert api.get(path).json()["items"][0]["session_id"] == value
    assert MainMessage.objects.get().session_id == value


@pytest.mark.parametrize("value", [".", "..", "a\\b", "x" * 201])
def test_the_api_refuses_a_hostile_sub_agent_name(api, value):
    parent = api.post("/sessions/s1/messages", {"role": "user", "content": "go"}).json()["id"]
    body = {"agent_name": value, "role": "assistant", "content": "working"}
    response = api.post(f"/messages/{parent}/subagent", body)
    assert response.status_code == 422
    assert MainMessage.objects.count() == 1


def test_a_message_of_an_agent_named_before_the_rules_is_refused(client, db):
    """A key made for agent ".." by an earlier version cannot write into files beside the data."""
    from memory.auth import api_key_create
    from tests.conftest import ApiClient

    _, key = api_key_create(agent_id="a1")
    ApiKey.objects.update(agent_id="..")  # as an earlier version let create_api_key do
    response = ApiClient(client, key).post(
        "/sessions/s1/messages", {"role": "user", "content": "x"}
    )
    assert response.status_code == 422
    assert not MainMessage.objects.exists()


@pytest.mark.parametrize(("value", "why"), HOSTILE_IDS)
def test_create_api_key_refuses_each_hostile_agent(value, why):
    with pytest.raises(CommandError):
        call_command("create_api_key", "--agent", value, stdout=io.StringIO())
    assert not ApiKey.objects.exists(), why


@pytest.mark.parametrize(("value", "why"), HOSTILE_IDS)
def test_the_jsonl_commands_refuse_each_hostile_agent_or_session(tmp_path, value, why):
    (tmp_path / "s.jsonl").write_text('{"role": "user", "content": "x"}\n')
    commands = [("migrate_jsonl", "--agent")]
    if value not in FORMAT_CHARACTER_IDS:  # those may name sessions stored before the rule
        commands += [("export_jsonl", "--agent"), ("export_jsonl", "--session")]
    for command, option in commands:
        target = str(tmp_path / ("s.jsonl" if command == "migrate_jsonl" else "out"))
        with pytest.raises(CommandError):
            call_command(command, target, option, value, stdout=io.StringIO())
    assert not MainMessage.objects.exists()
    assert not (tmp_path / "out").exists(), why


@pytest.mark.parametrize(("value", "why"), HOSTILE_IDS)
def test_the_admin_forms_refuse_each_hostile_id(admin_user, value, why):
    from memory.messages import message_add

    if not refused(value.strip()):
        pytest.skip("Django's form fields strip outer whitespace: the id stored is valid")
    request = RequestFactory().get("/admin/")
    request.user = admin_user
    key_form = admin.site._registry[ApiKey].get_form(request)(data={"agent_id": value})
    assert not key_form.is_valid() and "agent_id" in key_form.errors, why
    for field in ("agent_id", "session_id"):
        message_form = admin.site._registry[MainMessage].get_form(request)(
            data={
                "agent_id": "a",
                "session_id": "s",
                field: value,
                "role": "user",
                "content": "x",
                "msg_type": "normal",
                "metadata": "null",
            }
        )
        assert not message_form.is_valid()
        assert field in message_form.errors, why
    # A sub-agent reply takes its session from its parent message; its name is checked.
    parent = message_add(agent_id="a", session_id="s", role="user", content="x")
    subagent_form = admin.site._registry[SubagentMessage].get_form(request)(
        data={"parent_msg": parent.pk, "agent_name": value, "role": "assistant", "content": "x"}
    )
    assert not subagent_form.is_valid()
    assert "agent_name" in str(subagent_form.errors), why
    # Memories: the fields' validators apply check_identifier.
    for form, field in _memory_forms(request, value):
        assert not form.is_valid() and field in form.errors, why


def _memory_forms(request: Any, value: str) -> list[tuple[Any, str]]:
    """The memory admin's forms, each with `value` in one identifier field."""
    memory = {"content": "x", "memory_type": "fact", "confidence": "0.5", "agent_id": "a"}
    long_term = admin.site._registry[LongTermMemory].get_form(request)
    short_term = admin.site._registry[ShortTermMemory].get_form(request)
    forms = [
        (long_term(data={**memory, "agent_id": value}), "agent_id"),
        (short_term(data={**memory, "session_id": value}), "session_id"),
    ]
    if value:  # no source session is a valid one
        forms.append((long_term(data={**memory, "source_session": value}), "source_session"))
    return forms


def test_the_memory_admin_shows_the_message_of_the_identifier_rule(admin_user):
    request = RequestFactory().get("/admin/")
    request.user = admin_user
    for form, field in _memory_forms(request, "a/b"):
        with pytest.raises(InvalidInput) as refusal:
            check_identifier(field, "a/b")
        assert not form.is_valid()
        assert form.errors[field] == [str(refusal.value)]


def test_the_admin_forms_accept_a_good_id(admin_client):
    response = admin_client.post("/admin/memory/apikey/add/", {"agent_id": "a..b", "name": ""})
    assert response.status_code == 302
    assert ApiKey.objects.get().agent_id == "a..b"


def test_the_importer_reports_each_hostile_session_id_and_imports_the_rest(tmp_path):
    values = [value for value, _ in HOSTILE_IDS if value]  # no id: the file's name is used
    path = tmp_path / "ids.jsonl"
    lines = [{"role": "user", "content": "hostile", "session_id": value} for value in values]
    lines.append({"role": "user", "content": "fine", "session_id": "ok"})
    # ensure_ascii keeps the lone surrogate as the escape "\ud800", as a client would send it.
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))

    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("migrate_jsonl", str(path), stdout=out, stderr=io.StringIO())

    for number in range(1, len(values) + 1):
        assert f"{path}:{number}: session_id " in out.getvalue()
    assert list(MainMessage.objects.values_list("session_id", "content")) == [("ok", "fine")]


# --- file names made from ids ---------------------------------------------------------------

# Ids already stored by earlier versions can break today's rules: their names must be safe too.
NAMED_IDS = [value for value, _ in HOSTILE_IDS if value] + GOOD_IDS + ["中" * 200, ":" * 200, ""]


@pytest.mark.parametrize("value", NAMED_IDS)
def test_a_file_name_made_from_any_id_is_bounded_safe_and_stays_in_its_folder(tmp_path, value):
    name = id_file_name(value, ".jsonl")
    assert len(name.encode()) <= MAX_NAME_BYTES + len(".jsonl")
    assert "/" not in name and "\\" not in name and not name.startswith(".")
    assert name.isprintable()
    assert path_inside(tmp_path, name).parent == tmp_path
    if "~" not in name:  # reversible unless cut and hashed
        assert unquote(name.removesuffix(".jsonl"), errors="surrogatepass") == value


def test_a_long_name_ends_in_a_hash_of_the_whole_id():
    first, second = id_file_name("中" * 200), id_file_name("中" * 199 + "文")
    assert first != second
    assert first.startswith("中" * 60) and "~" in first
    assert id_file_name("~") == "%7E"  # so an uncut name never looks cut


def test_a_path_outside_its_folder_is_refused(tmp_path):
    (tmp_path / "inner").mkdir()
    (tmp_path / "inner" / "link").symlink_to(tmp_path)
    for names in [("..",), ("a", "..", ".."), ("link", "x")]:
        with pytest.raises(ValueError, match="outside"):
            path_inside(tmp_path / "inner", *names)


def stored(agent_id: str, session_id: str, content: str) -> None:
    """A row as an earlier version stored it, before today's rules."""
    MainMessage.objects.create(
        agent_id=agent_id, session_id=session_id, role="user", content=content, token_count=1
    )


def test_export_writes_every_session_inside_its_folder_whatever_the_ids(tmp_path):
    stored("..", "..", "dot dot")
    stored("a1", "中" * 200, "a 600-byte session id")
    stored("a1", "." * 3, "three dots")
    stored("a1", "s:1", "an id escaped in its file name")
    out = tmp_path / "deep" / "out"

    call_command("export_jsonl", str(out), stdout=io.StringIO())

    files = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    assert files and all(p.is_relative_to(out) for p in files)
    assert all(len(p.name.encode()) <= MAX_NAME_BYTES + len(".jsonl") for p in files)
    assert sorted((p.parent.name, p.name) for p in files)[0] == ("%2E.", "%2E..jsonl")
    # Imported back, the ids today's rules refuse are reported; the others come back.
    MainMessage.objects.all().delete()
    report = io.StringIO()
    with pytest.raises(CommandError, match="2 line"):
        call_command("migrate_jsonl", str(out / "a1"), "--agent", "a1", stdout=report)
    assert "%2E...jsonl:1: session_id must not be only dots" in report.getvalue()
    assert list(MainMessage.objects.values_list("session_id", flat=True)) == ["s:1"]


def test_the_backup_keeps_a_session_whose_name_would_be_too_long(
    settings, django_capture_on_commit_callbacks, tmp_path
):
    import dataclasses

    from memory.messages import message_add

    settings.ORCA = dataclasses.replace(settings.ORCA, jsonl_backup=True, data_dir=tmp_path)
    session = ":" * 200  # 200 bytes, 600 once escaped
    with django_capture_on_commit_callbacks(execute=True):
        message_add(agent_id="a1", session_id=session, role="user", content="kept")

    (path,) = (tmp_path / "jsonl" / "a1").iterdir()
    assert "~" in path.name and json.loads(path.read_text())["session_id"] == session


def test_the_backup_of_an_agent_named_before_the_rules_stays_in_the_backup_folder(
    settings, tmp_path
):
    import dataclasses

    settings.ORCA = dataclasses.replace(settings.ORCA, jsonl_backup=True, data_dir=tmp_path)
    path = jsonl.fallback_append(
        agent_id="..",
        session_id="orca",
        messages=[{"role": "user", "content": "x", "msg_type": "normal", "metadata": None}],
    )
    assert path == tmp_path / "jsonl" / "%2E." / "orca.jsonl"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jsonl"]


def test_backup_files_of_the_old_naming_are_still_imported(tmp_path):
    """Before names were encoded the backup used the raw ids; every line names its session,
    so importing the agent's folder brings in both namings."""
    folder = tmp_path / "jsonl" / "a1"
    folder.mkdir(parents=True)
    line = {"role": "user", "timestamp": "2026-01-01T00:00:00+00:00", "type": "normal"}
    (folder / "s:1.jsonl").write_text(json.dumps({**line, "session_id": "s:1", "content": "old"}))
    (folder / "s%3A1.jsonl").write_text(json.dumps({**line, "session_id": "s:1", "content": "new"}))

    call_command("migrate_jsonl", str(folder), "--agent", "a1", stdout=io.StringIO())

    assert sorted(MainMessage.objects.values_list("session_id", "content")) == [
        ("s:1", "new"),
        ("s:1", "old"),
    ]


def test_the_backup_folder_of_an_agent_is_its_encoded_name(settings, tmp_path):
    import dataclasses

    settings.ORCA = dataclasses.replace(settings.ORCA, data_dir=tmp_path)
    assert jsonl.backup_path("my agent", "会话:1") == Path(
        tmp_path, "jsonl", "my%20agent", "会话%3A1.jsonl"
    )


# --- a URL path that is not UTF-8 -----------------------------------------------------------


@pytest.fixture
def wsgi_call(monkeypatch):
    """Call the WSGI application as a server would, with the path given as its raw bytes.

    Django replaces PATH_INFO with "%XX" text before any middleware runs, which is what
    orca_memory.middleware.keep_raw_path works around: this calls the application gunicorn
    serves (orca_memory.wsgi's), where it runs as in production.
    """
    from django.core.signals import request_finished, request_started
    from django.core.wsgi import get_wsgi_application
    from django.db import close_old_connections

    # As Django's test client does: keep the test's connection and transaction open.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    application = get_wsgi_application()

    def call(
        method: str, path: bytes, body: dict | None = None, key: str = ""
    ) -> tuple[int, bytes]:
        data = json.dumps(body).encode() if body is not None else b""
        environ = {
            "REQUEST_METHOD": method,
            "PATH_INFO": path.decode("iso-8859-1"),  # PEP 3333
            "SCRIPT_NAME": "",
            "QUERY_STRING": "",
            "SERVER_NAME": "localhost",
            "SERVER_PORT": "80",
            "HTTP_HOST": "localhost",
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(data),
            "CONTENT_LENGTH": str(len(data)),
            "CONTENT_TYPE": "application/json",
            "HTTP_AUTHORIZATION": f"Bearer {key}",
        }
        status: list[str] = []
        content = b"".join(application(environ, lambda s, headers, *a: status.append(s)))
        return int(status[0].split()[0]), content

    yield call
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def test_a_session_id_that_is_not_utf8_in_the_url_is_refused(wsgi_call):
    from memory.auth import api_key_create

    _, key = api_key_create(agent_id="a1")
    message = {"role": "user", "content": "x"}

    status, content = wsgi_call("POST", b"/api/v1/sessions/a\xffb/messages", message, key)

    assert status == 422
    assert json.loads(content) == {
        "detail": "session_id: the URL path is not valid UTF-8",
        "errors": [{"loc": ["path", "session_id"], "msg": "the URL path is not valid UTF-8"}],
    }
    assert not MainMessage.objects.exists()
    # The same characters sent as text ("%25FF" in the URL) are a valid id.
    assert wsgi_call("POST", b"/api/v1/sessions/a%FFb/messages", message, key)[0] == 201
    assert MainMessage.objects.get().session_id == "a%FFb"


def test_a_dashboard_path_that_is_not_utf8_is_a_bad_request(wsgi_call):
    assert wsgi_call("GET", b"/sessions/a1/s\xff/")[0] == 400
