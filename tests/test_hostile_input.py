"""Hostile requests, in one table: each answers a clear 4xx in the API's one error shape
({"detail": str, "errors": [{"loc", "msg"}]}) and stores nothing, with the database up and
during an outage with the JSONL fallback on (which must not keep a line either).

Add a row for every new finding: method, path, body or query, the status expected, and where
the error points (`loc`) when it is about one field. `{memory}` and `{message}` in a path
stand for a memory and a message of the agent that exist, so that a refusal cannot be a 404.

Findings that do not come in as a request have their table beside the surface they test, run
by the tests there; extend the one that fits:
- HOSTILE_IDS / GOOD_IDS (tests/test_identifiers.py): ids on every surface that takes one
  (API, commands, admin forms, importer lines, file names);
- HOSTILE_LINES (tests/test_jsonl_hostile.py): lines of a JSONL file for migrate_jsonl;
- BAD_ADMIN_MESSAGES (tests/test_admin.py): what the admin's message form must refuse;
- ODD_RUN_METADATA (tests/test_subagent_metadata.py): stored run records the pages must show;
- HOSTILE_REQUESTS (tests/test_access_log.py): requests whose query must not reach the log.
"""

from __future__ import annotations

import dataclasses
import io
import json
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from django.core.management import CommandError, call_command
from django.db import OperationalError, connection

from memory import vectors
from memory.auth import api_key_create
from memory.management.commands import local_postgres
from memory.memories import memory_create
from memory.messages import message_add
from memory.models import LongTermMemory, MainMessage
from memory.search import MODES
from memory.validation import row_id
from tests.helpers import ROOT, last_line, manage, service_env
from tests.test_access_log import free_port, procfile_web_command, wait_for

pytestmark = pytest.mark.django_db

# What a refused request must leave as it was.
TABLES = ("main_messages", "subagent_messages", "long_term_memories", "long_term_memory_history")
JSON = "application/json"
MIB = 1024 * 1024
EMOJI = "\U0001f600"  # 4 bytes in UTF-8, 12 escaped as \ud83d\ude00


@dataclass(frozen=True)
class Hostile:
    name: str
    method: str
    path: str
    status: int
    body: dict[str, Any] | str | bytes | None = None  # text and bytes are sent as they are
    query: dict[str, Any] = field(default_factory=dict)
    content_type: str = JSON
    headers: dict[str, str] = field(default_factory=dict)
    loc: list[str | int] | None = None  # where the first error points, when it names a field


def message(**fields: Any) -> dict[str, Any]:
    return {"role": "user", "content": "hello", **fields}


def escaped(content: str) -> str:
    """A message body escaped as most clients send it (json.dumps' default, ensure_ascii)."""
    return json.dumps({"role": "user", "content": content})


NON_FINITE = ("NaN", "Infinity", "-Infinity", "1e400")
METADATA_LIMIT = 64 * 1024  # the default max_metadata_bytes
# Bidirectional controls, zero-width and other invisible characters (Unicode category Cf).
FORMAT_CHARACTERS = ("\u202e", "\u2066", "\u200f", "\u061c", "\u200b", "\u200d", "\u2060", "\ufeff")
# Queries without a letter or a digit: nothing the lexical index has a term for.
NOTHING_TO_SEARCH = ("", " ", "\t\n", "*", '"', '""', "-", "_", "* - ( )", "?!…", EMOJI, "\u3000")


def metadata_of(size: int, filler: str = "x") -> dict[str, str]:
    """Metadata of exactly `size` bytes as compact JSON in UTF-8 (`filler` of 1 or 2 bytes)."""
    room = size - len(b'{"k":""}')
    width = len(filler.encode())
    return {"k": filler * (room // width) + "x" * (room % width)}


CASES = [
    # 1. Non-finite numbers, as bare JSON tokens, wherever they are.
    *(
        Hostile(
            f"{token} in metadata",
            "POST",
            "/sessions/s1/messages",
            422,
            f'{{"role": "user", "content": "x", "metadata": {{"x": {token}}}}}',
            loc=["body", "metadata", "x"],
        )
        for token in NON_FINITE
    ),
    Hostile(
        "NaN deep in metadata",
        "POST",
        "/sessions/s1/messages",
        422,
        '{"role": "user", "content": "x", "metadata": {"a": [1, {"b": NaN}]}}',
        loc=["body", "metadata", "a", 1, "b"],
    ),
    Hostile(
        "NaN as the content",
        "POST",
        "/sessions/s1/messages",
        422,
        '{"role": "user", "content": NaN}',
        loc=["body", "content"],
    ),
    Hostile(
        "Infinity in a field the schema ignores",
        "POST",
        "/sessions/s1/messages",
        422,
        '{"role": "user", "content": "x", "extra": Infinity}',
        loc=["body", "extra"],
    ),
    Hostile("NaN as the whole body", "POST", "/sessions/s1/messages", 400, "NaN"),
    *(
        Hostile(
            f"confidence {token}",
            "POST",
            "/memories",
            422,
            f'{{"content": "x", "memory_type": "fact", "confidence": {token}}}',
            loc=["body", "confidence"],
        )
        for token in NON_FINITE
    ),
    Hostile(
        "confidence NaN on an update",
        "PATCH",
        "/memories/{memory}",
        422,
        '{"confidence": NaN}',
        loc=["body", "confidence"],
    ),
    Hostile(
        "model_window Infinity",
        "POST",
        "/sessions/s1/context",
        422,
        '{"model_window": Infinity}',
        loc=["body", "model_window"],
    ),
    Hostile(
        "-Infinity beside a sub-agent reply",
        "POST",
        "/messages/{message}/subagent",
        422,
        '{"agent_name": "r", "role": "assistant", "content": "x", "n": -Infinity}',
        loc=["body", "n"],
    ),
    Hostile(
        "NaN beside a sub-agent result",
        "POST",
        "/messages/{message}/subagent/result",
        422,
        '{"agent_name": "r", "content": "x", "n": NaN}',
        loc=["body", "n"],
    ),
    # 2. Datetimes without a time zone, or beyond year 9999 or before year 1 once in UTC.
    *(
        Hostile(
            f"expires_at {value} on {method}",
            method,
            path,
            422,
            {
                **({"content": "x", "memory_type": "fact"} if method == "POST" else {}),
                "expires_at": value,
            },
            loc=["body", "expires_at"],
        )
        for method, path in (("POST", "/memories"), ("PATCH", "/memories/{memory}"))
        for value in (
            "2030-01-01T00:00:00",
            "2030-01-01",
            "9999-12-31T23:30:00-01:00",
            "0001-01-01T00:30:00+01:00",
        )
    ),
    *(
        Hostile(
            f"{name}={value} in {mode} search",
            "GET",
            "/search",
            422,
            query={"q": "hello", "mode": mode, name: value},
            loc=["query", name],
        )
        for mode in MODES
        for name, value in (
            ("since", "0001-01-01T00:00:00"),
            ("since", "2024-05-01T10:00:00"),
            ("since", "0001-01-01T00:30:00+01:00"),
            ("until", "9999-12-31T23:30:00-01:00"),
            ("until", "2024-05-01"),
        )
    ),
    # The extremes that do exist answer, in every mode.
    *(
        Hostile(
            f"{name}={value} in {mode} search",
            "GET",
            "/search",
            200,
            query={"q": "hello", "mode": mode, name: value},
        )
        for mode in MODES
        for name, value in (
            ("since", "0001-01-01T00:00:00Z"),
            ("since", "0001-01-01T01:00:00+01:00"),
            ("until", "9999-12-31T23:59:59Z"),
            ("until", "9999-12-31T23:59:59+14:00"),
        )
    ),
    # NUL, which PostgreSQL cannot take in a text parameter, in every text a query reads.
    *(
        Hostile(
            f"NUL in a {mode} search",
            "GET",
            "/search",
            422,
            query={"q": "hel\x00lo", "mode": mode},
            loc=["query", "q"],
        )
        for mode in MODES
    ),
    Hostile(
        "NUL in a memory list's query",
        "GET",
        "/memories",
        422,
        query={"q": "tea\x00"},
        loc=["query", "q"],
    ),
    Hostile(
        "NUL in a search's session filter",
        "GET",
        "/search",
        422,
        query={"q": "hello", "session_id": "s\x00"},
        loc=["query", "session_id"],
    ),
    Hostile(
        "NUL in a context query",
        "POST",
        "/sessions/s1/context",
        422,
        {"query": "tea\x00"},
        loc=["body", "query"],
    ),
    # 13. Bodies that are not JSON, or not declared as JSON.
    Hostile("malformed JSON", "POST", "/sessions/s1/messages", 400, "{not json", loc=["body"]),
    Hostile("a JSON array", "POST", "/sessions/s1/context", 400, "[1, 2]", loc=["body"]),
    *(
        Hostile(
            f"JSON sent as {content_type or 'no content type'}",
            "POST",
            "/sessions/s1/messages",
            415,
            json.dumps(message()),
            content_type=content_type,
            loc=["header", "Content-Type"],
        )
        for content_type in ("text/plain", "application/x-www-form-urlencoded", "")
    ),
    Hostile(
        "a form",
        "POST",
        "/sessions/s1/messages",
        415,
        "role=user&content=hello",
        content_type="application/x-www-form-urlencoded",
        loc=["header", "Content-Type"],
    ),
    Hostile(
        "multipart",
        "POST",
        "/memories",
        415,
        b'--b\r\nContent-Disposition: form-data; name="content"\r\n\r\nx\r\n--b--\r\n',
        content_type="multipart/form-data; boundary=b",
        loc=["header", "Content-Type"],
    ),
    Hostile(
        "a session id with a trailing space (a domain check)",
        "POST",
        "/sessions/s1%20/context",
        422,
        {},
        loc=["path", "session_id"],
    ),
    Hostile(
        "an escaped lone surrogate",
        "POST",
        "/sessions/s1/messages",
        422,
        '{"role": "user", "content": "half \\ud800 a pair"}',
        loc=["body", "content"],
    ),
    Hostile(
        "invalid UTF-8 bytes",
        "POST",
        "/sessions/s1/messages",
        422,
        b'{"role": "user", "content": "bad \xff bytes"}',
        loc=["body", "content"],
    ),
    Hostile(
        "more query parameters than Django takes",
        "GET",
        "/search",
        400,
        query={"q": ["hello"] * 1001},
    ),
    Hostile(
        "a Host not allowed",
        "GET",
        "/sessions",
        400,
        headers={"Host": "evil.example"},
    ),
    # 13. Methods a path does not take: 405 in the same shape, with Allow.
    Hostile("PUT on /memories", "PUT", "/memories", 405, message()),
    Hostile("DELETE on /search", "DELETE", "/search", 405),
    Hostile("PATCH on messages", "PATCH", "/sessions/s1/messages", 405, message()),
    Hostile("GET on context", "GET", "/sessions/s1/context", 405),
    Hostile("POST on health", "POST", "/health", 405, {}),
    Hostile("OPTIONS on sessions", "OPTIONS", "/sessions", 405),
    Hostile("PUT on a memory", "PUT", "/memories/{memory}", 405, {"content": "y"}),
    # Paths that lead nowhere.
    Hostile("an unknown path", "POST", "/nowhere", 404, message()),
    Hostile("a memory id that is not a number", "PATCH", "/memories/abc", 404, {}),
    Hostile("a memory id beyond 64 bits", "PATCH", "/memories/" + "9" * 30, 404, {}),
    # A message's id as the memory's: ASCII digits within 64 bits, else no message has it.
    *(
        Hostile(f"a message id {name}", "GET", f"/messages/{text}", 404)
        for name, text in (
            ("that is not a number", "abc"),
            ("beyond 64 bits", "9" * 30),
            ("one over 64 bits", str(2**63)),
            ("below zero", "-1"),
            ("of full-width digits", quote("\uff11")),
            ("with a space", "%201"),
        )
    ),
    # 17. Content one emoji over the limit, escaped as clients send it: 413, not stored.
    Hostile(
        "one emoji over max_content_bytes, escaped",
        "POST",
        "/sessions/s1/messages",
        413,
        escaped(EMOJI * (MIB // 4 + 1)),
        loc=["body", "content"],
    ),
    # --- issue 30, low items 8, 13, 14, 15, 16 (item 10 and the rest: "issue 30" below) ---
    # 8. A path that is not UTF-8: the one error shape, pointing at the parameter.
    *(
        Hostile(
            f"a session id that is not UTF-8 ({path})",
            "POST",
            path,
            422,
            body,
            loc=["path", "session_id"],
        )
        for path, body in (
            ("/sessions/a%FFb/messages", message()),
            ("/sessions/a%FFb/messages:batch", {"messages": [message()]}),
            ("/sessions/%C3%28/context", {}),
        )
    ),
    # 13. Metadata one byte over max_metadata_bytes, counted as compact JSON in UTF-8.
    Hostile(
        "metadata one byte over max_metadata_bytes",
        "POST",
        "/sessions/s1/messages",
        413,
        message(metadata=metadata_of(METADATA_LIMIT + 1)),
        loc=["body", "metadata"],
    ),
    Hostile(
        "metadata one byte over max_metadata_bytes, escaped as clients send it",
        "POST",
        "/sessions/s1/messages",
        413,
        json.dumps(message(metadata=metadata_of(METADATA_LIMIT + 1, filler="é"))),
        loc=["body", "metadata"],
    ),
    Hostile(
        "metadata over max_metadata_bytes in a batch",
        "POST",
        "/sessions/s1/messages:batch",
        413,
        {"messages": [message(), message(metadata=metadata_of(6 * MIB))]},
        loc=["body", "messages", 1, "metadata"],
    ),
    # 14. Bidirectional and invisible format characters in an id written anew.
    *(
        Hostile(
            f"U+{ord(char):04X} in a session id",
            "POST",
            f"/sessions/{quote('s' + char + '1', safe='')}/messages",
            422,
            message(),
            loc=["path", "session_id"],
        )
        for char in FORMAT_CHARACTERS
    ),
    Hostile(
        "U+202E in a batch's session id",
        "POST",
        f"/sessions/{quote(chr(0x202E) + 's1', safe='')}/messages:batch",
        422,
        {"messages": [message()]},
        loc=["path", "session_id"],
    ),
    Hostile(
        "U+200B in a sub-agent's name",
        "POST",
        "/messages/{message}/subagent",
        422,
        {"agent_name": "research\u200ber", "role": "assistant", "content": "x"},
        loc=["body", "agent_name"],
    ),
    Hostile(
        "U+FEFF in a memory's source session",
        "POST",
        "/memories",
        422,
        {"content": "x", "memory_type": "fact", "source_session": "\ufeffs0"},
        loc=["body", "source_session"],
    ),
    # 15. A query with nothing to search for, in every mode, by GET and by POST.
    *(
        Hostile(
            f"q={q!r} in {mode} search",
            "GET",
            "/search",
            422,
            query={"q": q, "mode": mode},
            loc=["query", "q"],
        )
        for mode in MODES
        for q in NOTHING_TO_SEARCH
    ),
    *(
        Hostile(
            f"q={q!r} in {mode} search by POST",
            "POST",
            "/search",
            422,
            {"q": q, "mode": mode},
            loc=["body", "q"],
        )
        for mode in MODES
        for q in ("", "*", '"')
    ),
    Hostile(
        "no q in a search by POST", "POST", "/search", 422, {"mode": "lexical"}, loc=["body", "q"]
    ),
    # 16. POST /search takes the GET's fields with the GET's rules.
    Hostile(
        "NUL in a search by POST",
        "POST",
        "/search",
        422,
        {"q": "hel\x00lo"},
        loc=["body", "q"],
    ),
    Hostile(
        "a date without a time zone in a search by POST",
        "POST",
        "/search",
        422,
        {"q": "hello", "since": "2024-05-01T10:00:00"},
        loc=["body", "since"],
    ),
    Hostile(
        "k over 100 in a search by POST",
        "POST",
        "/search",
        422,
        {"q": "hello", "k": 101},
        loc=["body", "k"],
    ),
    Hostile("a search by POST that is not JSON", "POST", "/search", 400, "q=hello", loc=["body"]),
]


@pytest.fixture
def existing(api, fake_embedder):
    """A message (embedded, so that vector search runs) and a memory of the agent."""
    found = message_add(agent_id="agent-a", session_id="s0", role="user", content="hello there")
    vectors.embed_pending()
    memory = memory_create(agent_id="agent-a", content="likes tea", memory_type="fact", actor="t")
    return {"message": found.pk, "memory": memory.pk}


@dataclass(frozen=True)
class Condition:
    down: bool
    fallback: Path  # the JSONL folder a message goes to while the database is down


@pytest.fixture(params=["database up", "database down, JSONL fallback on"])
def condition(request, settings, tmp_path, monkeypatch) -> Condition:
    settings.ORCA = dataclasses.replace(settings.ORCA, jsonl_backup=True, data_dir=tmp_path)
    down = request.param.startswith("database down")
    if down:

        def unavailable(*rows: Any, **options: Any) -> None:
            raise OperationalError("unable to open database file")

        # As when SQLite cannot be opened: the insert fails after the message was checked, and
        # POST .../messages keeps it in the fallback instead.
        monkeypatch.setattr(MainMessage.objects, "bulk_create", unavailable)
    return Condition(down=down, fallback=tmp_path / "jsonl")


def stored(fallback: Path) -> dict[str, Any]:
    with connection.cursor() as cursor:
        counts: dict[str, Any] = {}
        for table in TABLES:
            cursor.execute(f'SELECT count(*) FROM "{table}"')
            counts[table] = cursor.fetchone()[0]
    counts["fallback lines"] = sorted(
        (str(path.relative_to(fallback)), path.read_bytes())
        for path in (fallback.rglob("*") if fallback.exists() else ())
        if path.is_file()
    )
    return counts


def send(client, api, case: Hostile, ids: dict[str, int]):
    body = case.body
    if isinstance(body, dict):
        body = json.dumps(body)
    return client.generic(
        case.method,
        "/api/v1" + case.path.format(**ids),
        data=body or "",
        content_type=case.content_type,
        headers={**api.headers, **case.headers},
        query_params=case.query,
    )


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_a_hostile_request_gets_its_4xx_in_the_one_error_shape_and_stores_nothing(
    client, api, existing, condition, case
):
    before = stored(condition.fallback)

    response = send(client, api, case, existing)

    assert response.status_code == case.status, response.content
    assert response["Content-Type"].startswith(JSON)
    body = response.json()
    assert stored(condition.fallback) == before
    if case.status == 200:
        assert body["mode"] == case.query["mode"]  # vector search did run, not its fallback
        return
    assert set(body) == {"detail", "errors"}
    assert isinstance(body["detail"], str) and body["detail"]
    assert all(set(e) == {"loc", "msg"} and isinstance(e["loc"], list) for e in body["errors"])
    if case.status in (413, 415, 422):  # about a part of the request: it says which
        assert body["errors"], body
    if case.loc is not None:
        assert body["errors"][0]["loc"] == case.loc, body
    if case.status == 405:
        assert body["errors"] == [] and response["Allow"]


def test_the_outage_rows_above_do_reach_the_fallback_when_a_message_is_valid(
    client, api, existing, condition
):
    response = send(
        client, api, Hostile("valid", "POST", "/sessions/s1/messages", 0, message()), existing
    )

    if condition.down:
        assert response.status_code == 202
        (line,) = (condition.fallback / "agent-a" / "s1.jsonl").read_text("utf-8").splitlines()
        assert json.loads(line)["content"] == "hello"
    else:
        assert response.status_code == 201


@pytest.mark.parametrize(
    "content",
    [EMOJI * (MIB // 4), "\x01" * MIB, "é" * (MIB // 2)],
    ids=["emoji, 12 bytes each escaped", "control characters, 6 each", "e-acute, 6 per 2"],
)
def test_content_of_exactly_max_content_bytes_is_stored_however_it_is_escaped(api, content):
    body = escaped(content)
    assert len(content.encode()) == MIB and len(body) >= 3 * MIB

    response = api.post("/sessions/s1/messages", body)

    assert response.status_code == 201, response.content[:300]
    assert MainMessage.objects.get().content == content


@pytest.mark.parametrize(
    "content_type", ["application/json; charset=utf-8", "application/merge-patch+json"]
)
def test_a_json_body_declared_with_a_charset_or_a_json_suffix_is_taken(client, api, content_type):
    response = client.post(
        "/api/v1/sessions/s1/messages",
        json.dumps(message()),
        content_type=content_type,
        headers=api.headers,
    )

    assert response.status_code == 201
    assert MainMessage.objects.count() == 1


# --- recovery: an outage with the JSONL fallback on, hostile messages among the rest ---

# Odd but valid: every one is accepted during the outage and imported once the database is back.
ACCEPTED_DURING_AN_OUTAGE = [
    ("s1", {"role": "user", "content": "断网时的消息"}),
    ("s1", {"role": "assistant", "content": "👩\u200d👩\u200d👧 family, 🇨🇳 flag, 𝔘𝔫𝔦𝔠𝔬𝔡𝔢"}),
    ("s1", {"role": "user", "content": "\u202eright-to-left\u202c, zero\u200bwidth\u200djoiner"}),
    ("s1", {"role": "user", "content": "\ufeffbyte-order mark first, e\u0301 combining"}),
    ("s1", {"role": "user", "content": "line\u2028separator\u2029paragraph\u0085NEL\r\nCRLF\t"}),
    ("s1", {"role": "user", "content": "\uffff noncharacter, \ue000 private, \U0010ffff last"}),
    ("s1", {"role": "tool", "content": "\x01\x1f\x7f control characters", "msg_type": "error"}),
    ("s1", {"role": "user", "content": '{"role": "system"}\n{"not": "a second line"}'}),
    ("s1", {"role": "user", "content": "said twice"}),
    ("s1", {"role": "user", "content": "said twice"}),
    (
        "s1",
        {
            "role": "system",
            "content": "numbers and keys at the edges",
            "metadata": {
                "big": 10**30,
                "tiny": 5e-324,
                "largest": 1.7976931348623157e308,
                "minus zero": -0.0,
                "键": ["值", None, True],
                "\u202e": {"deep": [[[{}]]]},
            },
        },
    ),
    ("会话 2 🙂", {"role": "user", "content": "a session id with spaces, CJK and an emoji"}),
]
# Refused during the outage as they are with the database up: no line in the fallback.
REFUSED_DURING_AN_OUTAGE = [
    ("s1", '{"role": "user", "content": "x", "metadata": {"x": NaN}}', JSON, 422),
    ("s1", '{"role": "user", "content": "x", "metadata": {"x": [Infinity]}}', JSON, 422),
    ("s1", '{"role": "user", "content": "x", "metadata": {"x": 1e400}}', JSON, 422),
    ("s1", '{"role": "user", "content": "half \\ud800 a pair"}', JSON, 422),
    ("s1", '{"role": "user", "content": "nul \\u0000 inside"}', JSON, 422),
    ("s1", b'{"role": "user", "content": "bad \xff bytes"}', JSON, 422),
    ("s1", '{"role": "user", "content": "x"}', "text/plain", 415),
    ("s1", json.dumps({"role": "user", "content": "x" * 1001}), JSON, 413),
    ("s1 ", '{"role": "user", "content": "x"}', JSON, 422),
]
POST_DURING_THE_OUTAGE = """
import json
from urllib.parse import quote
from django.test import Client

requests = json.loads(open(REQUESTS, encoding="utf-8", errors="surrogateescape").read())
client = Client(SERVER_NAME="localhost")
statuses = []
for session, body, content_type in requests:
    response = client.generic(
        "POST",
        f"/api/v1/sessions/{quote(session, safe='')}/messages",
        data=body.encode("utf-8", "surrogateescape"),
        content_type=content_type,
        headers={"Authorization": "Bearer " + KEY},
    )
    statuses.append(response.status_code)
print(json.dumps(statuses))
"""
STORED_ROWS = """
import json
from memory.models import MainMessage
rows = MainMessage.objects.order_by("id").values_list(
    "session_id", "role", "content", "msg_type", "metadata"
)
print(json.dumps([list(row) for row in rows]))
"""


@pytest.mark.slow
def test_after_an_outage_every_message_accepted_into_the_fallback_is_imported(tmp_path):
    good, broken = str(tmp_path / "good.db"), str(tmp_path / "broken.db")
    manage(tmp_path, "migrate", "--no-input", ORCA_DB_PATH=good)
    key = last_line(manage(tmp_path, "create_api_key", "--agent", "a1", ORCA_DB_PATH=good))
    (tmp_path / "broken.db").mkdir()  # a directory: SQLite cannot open it
    requests = [
        (session, json.dumps(body), JSON) for session, body in ACCEPTED_DURING_AN_OUTAGE
    ] + [
        (session, body.decode("utf-8", "surrogateescape") if isinstance(body, bytes) else body, ct)
        for session, body, ct, _ in REFUSED_DURING_AN_OUTAGE
    ]
    (tmp_path / "requests.json").write_text(json.dumps(requests), "utf-8", "surrogateescape")
    script = tmp_path / "post.py"
    script.write_text(
        f"KEY = {key!r}\nREQUESTS = {str(tmp_path / 'requests.json')!r}\n" + POST_DURING_THE_OUTAGE,
        "utf-8",
    )

    outage = manage(
        tmp_path,
        "shell",
        "-c",
        f"exec(open({str(script)!r}).read())",
        ORCA_DB_PATH=broken,
        ORCA_JSONL_BACKUP="1",
        ORCA_MAX_CONTENT_BYTES="1000",
    )

    statuses = json.loads(last_line(outage))
    assert statuses == [202] * len(ACCEPTED_DURING_AN_OUTAGE) + [
        status for *_, status in REFUSED_DURING_AN_OUTAGE
    ]
    fallback = tmp_path / "data" / "jsonl" / "a1"
    lines = sum(path.read_bytes().count(b"\n") for path in fallback.rglob("*.jsonl"))
    assert lines == len(ACCEPTED_DURING_AN_OUTAGE)  # and none of the refused

    manage(tmp_path, "migrate_jsonl", str(fallback), "--agent", "a1", ORCA_DB_PATH=good)

    rows = json.loads(last_line(manage(tmp_path, "shell", "-c", STORED_ROWS, ORCA_DB_PATH=good)))
    expected = [
        [
            session,
            body["role"],
            body["content"],
            body.get("msg_type", "normal"),
            body.get("metadata"),
        ]
        for session, body in ACCEPTED_DURING_AN_OUTAGE
    ]
    assert sorted(map(json.dumps, rows)) == sorted(map(json.dumps, expected))


# --- MCP at /mcp: every transport failure a JSON-RPC error, every refused call the API's -----
# (issue 30, low item 9). A request refused as a whole answers its HTTP status with
# {"jsonrpc": "2.0", "id": null, "error": {"code", "message"}} as application/json, never a
# page or text, and runs nothing; a tool call with an argument the API refuses answers 200
# with a tool result (isError) in the API's own sentence. tests/test_mcp.py sends the rows
# that are a body alone to `manage.py mcp_stdio` too, each as one line.

PARSE_ERROR, INVALID_REQUEST, INTERNAL_ERROR, UNAUTHORIZED = -32700, -32600, -32603, -32001


def jsonrpc(id_: Any = 1, method: str = "tools/call", **fields: Any) -> str:
    """A JSON-RPC request storing a message (so that a request run by mistake leaves a row)."""
    params = {
        "name": "store_message",
        "arguments": {"session_id": "s1", "role": "user", "content": "hello"},
    }
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params, **fields})


@dataclass(frozen=True)
class HostileMcp:
    name: str
    body: str | bytes
    status: int
    code: int  # the JSON-RPC error's
    content_type: str = JSON
    headers: dict[str, str] = field(default_factory=dict)
    key: bool = True  # sent with agent-a's valid key
    crash: bool = False  # the key check fails with an error nobody expected


MCP_CASES = [
    HostileMcp(
        "a Host not in ALLOWED_HOSTS",
        jsonrpc(),
        400,
        INVALID_REQUEST,
        headers={"Host": "evil.example"},
    ),
    HostileMcp(
        "Content-Type text/plain", jsonrpc(), 415, INVALID_REQUEST, content_type="text/plain"
    ),
    HostileMcp("no Content-Type", jsonrpc(), 415, INVALID_REQUEST, content_type=""),
    HostileMcp("no key", jsonrpc(), 401, UNAUTHORIZED, key=False),
    HostileMcp("an error while the key is checked", jsonrpc(), 500, INTERNAL_ERROR, crash=True),
    HostileMcp("not JSON", b"{not json", 400, PARSE_ERROR),
    HostileMcp("NUL bytes", b"\x00\x00\x00", 400, PARSE_ERROR),
    HostileMcp("a NUL byte inside a request", jsonrpc()[:-1] + "\x00}", 400, PARSE_ERROR),
    HostileMcp("not UTF-8", b"\xff\xfe{}", 400, PARSE_ERROR),
    HostileMcp(
        "nested 5,000 deep",
        jsonrpc()[:-1] + ', "x": ' + "[" * 5000 + "]" * 5000 + "}",
        400,
        PARSE_ERROR,
    ),
    HostileMcp("a batch", f"[{jsonrpc()}]", 400, INVALID_REQUEST),
    HostileMcp("an empty batch", "[]", 400, INVALID_REQUEST),
    HostileMcp("a number", "1", 400, INVALID_REQUEST),
    *(
        HostileMcp(f"id {raw}", jsonrpc(id_), 400, INVALID_REQUEST)
        for raw, id_ in (("1.5", 1.5), ("1.0", 1.0), ("true", True), ("null", None), ("{}", {}))
    ),
    HostileMcp(
        "id 1.5 on the 2026-07-28 wire",
        jsonrpc(1.5),
        400,
        INVALID_REQUEST,
        headers={"MCP-Protocol-Version": "2026-07-28"},
    ),
    HostileMcp('jsonrpc "1.0"', jsonrpc(jsonrpc="1.0"), 400, INVALID_REQUEST),
    HostileMcp("neither method nor result", '{"jsonrpc": "2.0", "id": 1}', 400, INVALID_REQUEST),
]

# (tool, arguments, the tool error after "Error executing tool <tool>: ": the API's sentence)
MCP_REFUSED_CALLS = [
    (
        "store_message",
        {"session_id": "s1", "role": "robot", "content": "x"},
        "role: Input should be 'user', 'assistant', 'system' or 'tool'",
    ),
    (
        "store_message",
        {"session_id": "s1", "role": "user", "content": "x", "msg_type": "rumour"},
        "msg_type: Input should be 'normal', 'fact', 'todo', 'decision', 'preference' or 'error'",
    ),
    (
        "remember",
        {"content": "x", "memory_type": "opinion"},
        "memory_type: Input should be 'preference', 'fact', 'decision' or 'project'",
    ),
    (
        "search",
        {"query": "x", "mode": "x"},
        "mode: Input should be 'hybrid', 'lexical' or 'vector'",
    ),
    ("list_memories", {"state": "x"}, "state: Input should be 'active' or 'all'"),
    (
        "update_memory",
        {"memory_id": "one"},
        "memory_id: Input should be a valid integer, unable to parse string as an integer",
    ),
    (
        "get_message",
        {"message_id": "12abc"},
        "message_id: Input should be a valid integer, unable to parse string as an integer",
    ),
    ("get_message", {"message_id": 0}, "message_id: Input should be greater than or equal to 1"),
]


def post_mcp(client, body: str | bytes, content_type: str = JSON, **headers: str):
    sent = {"Accept": "application/json, text/event-stream", **headers}
    return client.generic("POST", "/mcp", data=body, content_type=content_type, headers=sent)


@pytest.mark.parametrize("case", MCP_CASES, ids=[case.name for case in MCP_CASES])
def test_a_hostile_mcp_request_gets_a_json_rpc_error_and_runs_nothing(
    client, api, monkeypatch, case
):
    if case.crash:

        def crashing(key: str) -> str:
            raise RuntimeError("an unexpected failure")

        monkeypatch.setattr("memory.mcp_server.agent_for_key", crashing)
        client.raise_request_exception = False  # answered as in production

    key = api.headers if case.key else {}
    response = post_mcp(client, case.body, case.content_type, **key, **case.headers)

    assert response.status_code == case.status, response.content
    assert response["Content-Type"].startswith(JSON)
    body = response.json()
    assert set(body) == {"jsonrpc", "id", "error"} and body["jsonrpc"] == "2.0"
    assert body["id"] is None
    assert body["error"]["code"] == case.code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert not MainMessage.objects.exists()


@pytest.mark.parametrize(("tool", "arguments", "sentence"), MCP_REFUSED_CALLS)
def test_a_refused_mcp_call_is_a_tool_error_in_the_apis_sentence(
    client, api, tool, arguments, sentence
):
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
    )

    response = post_mcp(client, body, **api.headers)

    assert response.status_code == 200
    result = response.json()["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"] == f"Error executing tool {tool}: {sentence}"
    assert not MainMessage.objects.exists()


# --- issue 30, low items 8, 10, 13, 14, 15, 16: what a CASES row cannot say -----------------
# (a dashboard page or form, a refusal on another surface, or what must still be accepted)


def test_a_path_that_is_not_utf8_never_reaches_the_id_its_escaped_text_names(api):
    """Item 8: `a%FFb` (the byte FF) is refused; `a%25FFb` is the literal id "a%FFb"."""
    refused = api.post("/sessions/a%FFb/messages", message())
    literal = api.post("/sessions/a%25FFb/messages", message())

    assert refused.status_code == 422 and literal.status_code == 201
    assert MainMessage.objects.get().session_id == "a%FFb"
    assert api.get("/sessions/a%FFb/messages").status_code == 422
    assert api.get("/sessions/a%25FFb/messages").json()["count"] == 1


@pytest.mark.parametrize(
    ("path", "language", "reason"),
    [
        ("/sessions/default/a%FFb/", "en", "The address is not valid UTF-8"),
        ("/memories/%FF/", "zh-hans", "该地址不是有效的 UTF-8"),
    ],
)
def test_the_dashboard_answers_a_path_that_is_not_utf8_with_its_400_page(
    admin_client, path, language, reason
):
    response = admin_client.get(path, headers={"Accept-Language": language})

    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert 'class="card narrow error-page"' in page  # templates/error.html, like its 404
    assert "data-error-reason>" + reason in page
    assert "ORCA_ALLOWED_HOSTS" not in page  # the hint of a host not allowed is not this


HUGE_ID = "99999999999999999999"  # beyond 64 bits: SQLite's driver raised OverflowError


@pytest.mark.parametrize("ids", [[HUGE_ID], ["-" + HUGE_ID], [str(2**63)], ["1", HUGE_ID]])
def test_a_bulk_action_on_ids_beyond_64_bits_is_the_forms_400_and_changes_nothing(
    admin_client, ids
):
    """Item 10: as an id of no memory is (a form error on the 400 page), not a 500."""
    memory = memory_create(agent_id="a", content="likes tea", memory_type="fact", actor="t")
    ids = [str(memory.pk) if value == "1" else value for value in ids]

    response = admin_client.post(
        "/memories/bulk/", {"memory": ids, "action": "delete", "confirmed": "1"}
    )

    assert response.status_code == 400
    assert "is not one of the available choices" in response.content.decode()
    assert LongTermMemory.objects.filter(pk=memory.pk).exists()


def test_the_admin_takes_ids_beyond_64_bits_as_ids_of_no_row(admin_client):
    """Item 10's other holes: the admin's actions (`_selected_action`) and its `__in`
    filters, on an id and on a foreign key, went to the database as they came."""
    parent = message_add(agent_id="a", session_id="s", role="user", content="x")

    action = admin_client.post(
        "/admin/memory/mainmessage/",
        {"action": "delete_selected", "_selected_action": [HUGE_ID, str(parent.pk)]},
    )
    listed = [
        admin_client.get(path).status_code
        for path in (
            f"/admin/memory/mainmessage/?id__in={parent.pk},{HUGE_ID}",
            f"/admin/subagents/subagentmessage/?parent_msg__in={HUGE_ID}",
        )
    ]

    assert action.status_code == 200  # the confirmation page, of the one message that exists
    assert f"/admin/memory/mainmessage/{parent.pk}/" in action.content.decode()
    assert listed == [200, 200]
    assert MainMessage.objects.filter(pk__in=[parent.pk, int(HUGE_ID)]).count() == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1", 1),
        (str(2**63 - 1), 2**63 - 1),
        (str(2**63), None),
        (HUGE_ID, None),
        ("-1", None),
        ("１", None),  # a full-width digit: isdigit() takes it, int() reads it
        (" 1", None),
        ("", None),
        (None, None),
    ],
)
def test_a_urls_row_id_is_ascii_digits_within_64_bits(text, expected):
    """The session page's `?at=` and MCP's memory resource read an id from text this way."""
    assert row_id(text) == expected


@pytest.fixture
def small_metadata_limit(settings):
    settings.ORCA = dataclasses.replace(settings.ORCA, max_metadata_bytes=100)


@pytest.mark.parametrize("filler", ["x", "é", "\x01"], ids=["ASCII", "2 bytes", "escaped \\u0001"])
def test_metadata_of_exactly_max_metadata_bytes_is_stored_however_it_is_escaped(api, filler):
    """Item 13: counted as compact JSON in UTF-8, not as the client's escapes and spaces."""
    if filler == "\x01":  # serialised as \u0001 in any JSON: 6 bytes, 6 * 10 + 8 = the limit
        metadata = {"k": "\x01" * ((METADATA_LIMIT - 8) // 6) + "x" * ((METADATA_LIMIT - 8) % 6)}
    else:
        metadata = metadata_of(METADATA_LIMIT, filler)
    compact = json.dumps(metadata, ensure_ascii=False, separators=(",", ":")).encode()
    assert len(compact) == METADATA_LIMIT

    response = api.post("/sessions/s1/messages", json.dumps(message(metadata=metadata), indent=4))

    assert response.status_code == 201, response.content[:300]
    assert MainMessage.objects.get().metadata == metadata


def test_metadata_over_the_limit_is_refused_by_the_admin_and_the_importer(
    admin_client, small_metadata_limit, tmp_path
):
    """Item 13 on the surfaces that are not the API (MCP: the test below)."""
    response = admin_client.post(
        "/admin/memory/mainmessage/add/",
        {
            "agent_id": "a",
            "session_id": "s",
            "role": "user",
            "content": "x",
            "msg_type": "normal",
            "metadata": json.dumps({"k": "x" * 100}),
        },
    )
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"role": "user", "content": "x", "metadata": {"k": "x" * 100}}))
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("migrate_jsonl", str(path), "--agent", "a", stdout=out)

    assert response.status_code == 200  # the form again, with the error
    assert "metadata is larger than 100 bytes" in response.content.decode()
    assert "metadata is larger than 100 bytes" in out.getvalue()
    assert not MainMessage.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_mcp_refuses_what_the_api_refuses_in_an_id_metadata_and_a_query(
    live_server, small_metadata_limit
):
    """Items 13, 14 and 15 on MCP, with the API's messages (memory.mcp_server)."""
    from tests.test_mcp import call, error

    key = api_key_create(agent_id="a")[1]
    answers = {
        "metadata": call(
            live_server.url,
            key,
            "store_message",
            session_id="s",
            role="user",
            content="x",
            metadata={"k": "x" * 100},
        ),
        "session": call(
            live_server.url, key, "store_message", session_id="s\u202e", role="user", content="x"
        ),
        "query": call(live_server.url, key, "search", query="*"),
    }

    assert "metadata is larger than 100 bytes" in error(answers["metadata"])
    assert "U+202E" in error(answers["session"])
    assert "query has nothing to search for" in error(answers["query"])
    assert not MainMessage.objects.exists()


def test_ids_stored_before_the_format_character_rule_stay_readable(
    api, admin_client, tmp_path, django_capture_on_commit_callbacks
):
    """Item 14: only ids written anew are refused; a session stored with U+202E or U+200B
    (by an earlier version) is still listed, shown, read, put in a context and exported."""
    for session in ("s\u202e1", "s\u200b2"):
        MainMessage.objects.create(
            agent_id="agent-a", session_id=session, role="user", content="old", token_count=1
        )

    pages = [
        admin_client.get(path)
        for path in (
            "/sessions/",
            f"/sessions/agent-a/{quote('s' + chr(0x202E) + '1', safe='')}/",
        )
    ]
    path = f"/sessions/{quote('s' + chr(0x200B) + '2', safe='')}"
    read = api.get(path + "/messages")
    context = api.post(path + "/context", {})
    written = api.post(path + "/messages", message())
    call_command("export_jsonl", str(tmp_path), "--session", "s\u200b2", stdout=io.StringIO())

    assert [page.status_code for page in pages] == [200, 200]
    assert "s\u202e1" in pages[0].content.decode()
    assert read.status_code == 200 and read.json()["count"] == 1
    assert context.status_code == 200
    assert written.status_code == 422  # new messages are refused
    assert "U+200B" in written.json()["detail"]
    assert [p.name for p in (tmp_path / "agent-a").iterdir()] == ["s%E2%80%8B2.jsonl"]


@pytest.mark.parametrize("q", ["", "*", '"', "   "])
def test_the_dashboards_search_stays_a_page_for_a_query_with_nothing_to_search(
    admin_client, existing, q
):
    """Item 15: the page with its form and the reason, no hits (the API answers 422)."""
    response = admin_client.get("/search/", {"q": q, "mode": "vector"})

    assert response.status_code == 200
    page = response.content.decode()
    assert 'class="error"' in page and 'class="hits"' not in page


def test_search_by_post_answers_as_the_get_and_takes_a_query_too_long_for_a_url(
    api, existing, fake_embedder
):
    """Item 16: gunicorn refuses a request line over 4,094 bytes (limit_request_line)."""
    fields = {
        "q": "hello",
        "mode": "hybrid",
        "k": 5,
        "role": "user",
        "since": "2000-01-01T00:00:00Z",
    }

    by_get = api.get("/search", **fields)
    by_post = api.post("/search", fields)
    long = api.post("/search", {"q": "hello " + "word " * 2000, "mode": "lexical"})

    assert by_get.status_code == by_post.status_code == 200
    assert by_post.json() == by_get.json() and by_post.json()["hits"]
    assert long.status_code == 200 and long.json()["hits"]
    assert len(long.json()["query"]) > 4094


@pytest.mark.slow
def test_under_the_procfiles_gunicorn_long_queries_go_by_post_and_broken_paths_are_refused(
    tmp_path,
):
    """Items 8 and 16 where they were found: gunicorn's own 414 page for a long GET, and the
    path's bytes as gunicorn decodes them."""
    home = tmp_path / "orca"
    manage(home, "migrate", "--no-input")
    key = last_line(manage(home, "create_api_key", "--agent", "a1"))
    port = free_port()
    server = subprocess.Popen(
        procfile_web_command(f"127.0.0.1:{port}"),
        cwd=ROOT,
        env=service_env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    query = {"q": "tea " * 1100, "mode": "lexical"}  # 4,400 characters
    try:
        base = f"http://127.0.0.1:{port}/api/v1"
        wait_for(f"{base}/health", server)
        with httpx.Client(headers={"Authorization": f"Bearer {key}"}) as http:
            by_get = http.get(f"{base}/search", params=query)
            by_post = http.post(f"{base}/search", json=query)
            broken = http.post(f"{base}/sessions/a%FFb/messages", json=message())
            literal = http.post(f"{base}/sessions/a%25FFb/messages", json=message())
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=30)

    assert by_get.status_code == 414  # gunicorn's, before the service sees it
    assert by_post.status_code == 200 and by_post.json()["query"] == query["q"]
    assert broken.status_code == 422
    assert broken.json()["errors"] == [
        {"loc": ["path", "session_id"], "msg": "the URL path is not valid UTF-8"}
    ]
    assert literal.status_code == 201 and literal.json()["session_id"] == "a%FFb"


# --- issue 30, low items 11, 18 and 19: regression tests --------------------------------------

# 11. Tool calls stored malformed: the context sends an OpenAI-valid message either way, the
# well-formed calls only (object arguments as their JSON text), and its item says what it left
# out. Each: the assistant message's `metadata.tool_calls`, then the calls sent (None: none).
CALL_9 = {"id": "call_9", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
STORED_TOOL_CALLS = {
    "an id only": ([{"id": "call_9"}], None),
    "a numeric name": ([{**CALL_9, "function": {"name": 7, "arguments": "{}"}}], None),
    "an empty name": ([{**CALL_9, "function": {"name": "", "arguments": "{}"}}], None),
    "a numeric id": ([{**CALL_9, "id": 9}], None),
    "another type": ([{**CALL_9, "type": "retrieval"}], None),
    "no arguments": ([{**CALL_9, "function": {"name": "weather"}}], None),
    "arguments as a list": ([{**CALL_9, "function": {"name": "weather", "arguments": [1]}}], None),
    "a call that is a string": (["call_9"], None),
    "calls that are an object": (CALL_9, None),
    "object arguments": (
        [{**CALL_9, "function": {"name": "weather", "arguments": {"city": "杭州"}}}],
        [{**CALL_9, "function": {"name": "weather", "arguments": '{"city": "杭州"}'}}],
    ),
    "no type, extra keys": (
        [{"id": "call_9", "function": {"name": "weather", "arguments": "{}", "x": 1}, "y": 2}],
        [CALL_9],
    ),
    "the same id twice": ([CALL_9, CALL_9], [CALL_9]),
    "a good call and a bad one": ([CALL_9, {"id": "call_10"}], [CALL_9]),
}


@pytest.mark.parametrize(
    ("stored_calls", "sent"), STORED_TOOL_CALLS.values(), ids=STORED_TOOL_CALLS.keys()
)
def test_the_context_sends_only_well_formed_tool_calls(api, stored_calls, sent):
    api.post("/sessions/s1/messages", message(content="weather?"))
    api.post(
        "/sessions/s1/messages",
        {"role": "assistant", "content": "calling", "metadata": {"tool_calls": stored_calls}},
    )
    api.post(
        "/sessions/s1/messages",
        {"role": "tool", "content": "sunny", "metadata": {"tool_call_id": "call_9"}},
    )

    body = api.post("/sessions/s1/context", {"model_window": 8192}).json()

    if sent is None:
        assert body["messages"][-2:] == [
            {"role": "assistant", "content": "calling"},
            {"role": "assistant", "content": "[tool result] sunny"},
        ]
    else:
        assert body["messages"][-2:] == [
            {"role": "assistant", "content": "calling", "tool_calls": sent},
            {"role": "tool", "tool_call_id": "call_9", "content": "sunny"},
        ]
    (calling,) = [
        item
        for item in body["explanation"]["layers"]["working"]["items"]
        if item["content"] == "calling"
    ]
    left_out = len(stored_calls) - len(sent or []) if isinstance(stored_calls, list) else 1
    if left_out:
        assert calling["details"]["left_out_tool_calls"].startswith(
            f"{left_out} tool call(s) not sent"
        )
    else:
        assert "left_out_tool_calls" not in calling["details"]


# 18. export_jsonl into a folder holding a symbolic link where a session's file goes: a
# one-line CommandError naming the path and why, and nothing written, there or elsewhere.
# Each: what is planted in DIR (`out`), with `elsewhere` a folder beside it; the error's why.
PLANTED_IN_THE_EXPORT = {
    "a link to a folder elsewhere": (
        lambda out, elsewhere: (out / "a1").symlink_to(elsewhere),
        "through the symbolic link {out}/a1 to {elsewhere}/s1.jsonl, outside {out}",
    ),
    "a dangling link out": (
        lambda out, elsewhere: (out / "a1").symlink_to(elsewhere / "gone"),
        "through the symbolic link {out}/a1 to {elsewhere}/gone/s1.jsonl, outside {out}",
    ),
    "a link to the session's file elsewhere": (
        lambda out, elsewhere: (
            (out / "a1").mkdir(),
            (out / "a1" / "s1.jsonl").symlink_to(elsewhere / "s1.jsonl"),
        ),
        "through the symbolic link {out}/a1/s1.jsonl to {elsewhere}/s1.jsonl, outside {out}",
    ),
    "links in a loop": (
        lambda out, elsewhere: (
            (out / "a1").mkdir(),
            (out / "a1" / "s1.jsonl").symlink_to(out / "a1" / "loop"),
            (out / "a1" / "loop").symlink_to(out / "a1" / "s1.jsonl"),
        ),
        "{out}/a1/s1.jsonl cannot be resolved",  # the loop, said as Python's version says it
    ),
}


@pytest.mark.parametrize(
    ("plant", "why"), PLANTED_IN_THE_EXPORT.values(), ids=PLANTED_IN_THE_EXPORT.keys()
)
def test_export_jsonl_into_a_folder_with_a_planted_path_says_why_and_writes_nothing(
    tmp_path, plant, why
):
    message_add(agent_id="a0", session_id="s1", role="user", content="exported before a1")
    message_add(agent_id="a1", session_id="s1", role="user", content="behind the planted path")
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    plant(out, elsewhere)
    before = sorted(tmp_path.rglob("*"))

    with pytest.raises(CommandError) as refused:
        call_command("export_jsonl", str(out), stdout=io.StringIO())

    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"cannot export into {out}: ")
    assert why.format(out=out, elsewhere=elsewhere) in message
    assert sorted(tmp_path.rglob("*")) == before


def test_export_jsonl_that_cannot_write_a_file_says_which_in_one_line(tmp_path):
    message_add(agent_id="a1", session_id="s1", role="user", content="no folder for it")
    out = tmp_path / "out"
    out.mkdir()
    (out / "a1").write_text("")  # a file where the agent's folder goes

    with pytest.raises(CommandError) as refused:
        call_command("export_jsonl", str(out), stdout=io.StringIO())

    assert str(refused.value) == (
        f"cannot export into {out}: [Errno 20] Not a directory: '{out}/a1/s1.jsonl'"
    )


# 19. `local_postgres --stop` says what happened, truthfully: a server that does not stop is
# an error (the slow test in tests/test_local_postgres.py stops a real one), and nothing to
# stop starts nothing.
class FakePgCtl:
    """pg_ctl for a server that runs and will not stop."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, pgdata: Path, *args: str) -> subprocess.CompletedProcess[str]:
        self.calls.append(args)
        if args[0] == "stop":
            said = "waiting for server to shut down.... failed\npg_ctl: server does not shut down\n"
            return subprocess.CompletedProcess(args, 1, "", said)
        return subprocess.CompletedProcess(args, 0, "pg_ctl: server is running (PID: 1)\n", "")


@pytest.fixture
def orca_home(settings, tmp_path) -> Path:
    settings.ORCA = dataclasses.replace(settings.ORCA, home=tmp_path)
    return tmp_path


def test_local_postgres_stop_of_a_server_that_keeps_running_fails_and_says_so(
    orca_home, monkeypatch
):
    (orca_home / "postgres").mkdir()
    (orca_home / "postgres" / "PG_VERSION").write_text("18\n")
    pg_ctl = FakePgCtl()
    monkeypatch.setattr(local_postgres, "_pg_ctl", pg_ctl)

    with pytest.raises(CommandError) as refused:
        call_command("local_postgres", "--stop", stderr=io.StringIO())

    assert str(refused.value) == (
        f"Could not stop the PostgreSQL server in {orca_home / 'postgres'}: waiting for server "
        "to shut down.... failed pg_ctl: server does not shut down"
    )
    assert [call[0] for call in pg_ctl.calls] == ["status", "stop", "status"]


def test_local_postgres_stop_with_no_server_starts_none(orca_home):
    said = io.StringIO()

    call_command("local_postgres", "--stop", stderr=said)

    assert (
        said.getvalue() == f"No PostgreSQL server in {orca_home / 'postgres'}: nothing to stop.\n"
    )
    assert list(orca_home.iterdir()) == []
