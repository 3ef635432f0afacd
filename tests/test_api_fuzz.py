"""schemathesis against the OpenAPI schema, every operation, with a valid key: no 5xx, and
every response as the schema says; then the same requests with what a schema cannot
generate (NaN and Infinity, dates without a time zone or beyond UTC's years): refused, 422,
nothing stored. Bounded to a few examples per operation."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections, connection
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis import checks

from memory.auth import api_key_create

schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", get_wsgi_application())


@pytest.fixture(autouse=True)
def _keep_the_test_connection_open():
    # As Django's test client does: a real WSGI call would close the connection after each
    # request, and with it the test's transaction.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.mark.django_db
@schema.parametrize()
# derandomize: the same examples on every run, so CI never fails by the luck of a draw.
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_the_api_answers_every_generated_request_as_documented(case):
    _, key = api_key_create(agent_id="fuzz")
    case.headers = {**(case.headers or {}), "Authorization": f"Bearer {key}", "Host": "localhost"}
    # What this test asserts: no 5xx, and every status, content type, body and header as
    # documented. Left out: the authentication checks (they cannot strip a key set by hand;
    # tests/test_api_auth.py covers 401 for every endpoint) and the accept/reject checks:
    # orca's text rules (no NUL, valid UTF-8, ids without "/" or control characters) are
    # stricter than the schema can say, and it accepts epoch seconds for dates; the rules
    # are tested in tests/test_api_messages.py.
    case.validate_response(
        case.call(),
        checks=[
            checks.not_a_server_error,
            checks.status_code_conformance,
            checks.content_type_conformance,
            checks.response_schema_conformance,
            checks.response_headers_conformance,
        ],
    )


# --- what JSON and the schema cannot say: non-finite numbers and naive or overflowing dates ---

TABLES = ("main_messages", "subagent_messages", "long_term_memories", "long_term_memory_history")
NON_FINITE = ("NaN", "Infinity", "-Infinity", "1e400")  # Python's json reads all four
SENTINEL = "\x1fnon-finite\x1f"


def _stored() -> dict[str, int]:
    with connection.cursor() as cursor:
        counts = {}
        for table in TABLES:
            cursor.execute(f'SELECT count(*) FROM "{table}"')
            counts[table] = cursor.fetchone()[0]
    return counts


def _places(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a body a value can sit: each existing one, and a new key in each object."""
    places = [at] if at else []
    if isinstance(value, dict):
        places.append((*at, "extra"))
        for key, item in value.items():
            places.extend(_places(item, (*at, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            places.extend(_places(item, (*at, index)))
    return places


def _put(body: Any, at: tuple[Any, ...], value: Any) -> Any:
    body = copy.deepcopy(body)
    container = body
    for step in at[:-1]:
        container = container[step]
    container[at[-1]] = value
    return body


def _call_with_key(case: Any, **kwargs: Any) -> Any:
    _, key = api_key_create(agent_id="fuzz")
    case.headers = {**(case.headers or {}), "Authorization": f"Bearer {key}", "Host": "localhost"}
    return case.call(**kwargs)


DOCUMENTED = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]

# Valid requests only (positive mode), so that what is injected is the one thing wrong.
positive = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", get_wsgi_application())
positive.config.generation.update(modes=["positive"])
# POST /import takes an archive (JSON Lines), not a JSON body: its refusals are test_archive.py's.
with_bodies = positive.include(method=["POST", "PATCH"]).exclude(
    path_regex=r"/(end|expire|import)$"
)


@pytest.mark.django_db
@with_bodies.parametrize()
@with_bodies.given(data=st.data())
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_a_non_finite_number_anywhere_in_a_generated_body_is_refused_and_stores_nothing(case, data):
    if not isinstance(case.body, dict):
        case.body = {}
    at = data.draw(st.sampled_from(_places(case.body) or [("extra",)]), label="where")
    token = data.draw(st.sampled_from(NON_FINITE), label="token")
    raw = json.dumps(_put(case.body, at, SENTINEL)).replace(json.dumps(SENTINEL), token)
    before = _stored()

    response = _call_with_key(case, data=raw.encode())

    case.validate_response(response, checks=DOCUMENTED)
    # 404: a generated path that leads nowhere (a session id with "/") fails before the body.
    assert response.status_code in (404, 422), response.text
    if response.status_code == 422:
        assert response.json()["errors"][0]["loc"] == ["body", *at]
    assert _stored() == before


def _naive() -> st.SearchStrategy[str]:
    return st.datetimes().map(lambda moment: moment.isoformat())


def _beyond_utc() -> st.SearchStrategy[str]:
    """Dates that exist where they are said but not in UTC: past 9999 or before year 1."""
    late = st.builds(
        lambda hours, minute: f"9999-12-31T23:{minute:02d}:00-{hours:02d}:00",
        st.integers(1, 14),
        st.integers(0, 59),
    )
    early = st.builds(
        lambda hours, minute: f"0001-01-01T00:{minute:02d}:00+{hours:02d}:00",
        st.integers(1, 14),
        st.integers(0, 59),
    )
    return st.one_of(late, early)


with_dates = positive.include(
    path_regex=r"/(search|memories(/\{memory_id\})?)$", method=["GET", "POST", "PATCH"]
)


@pytest.mark.django_db
@with_dates.parametrize()
@with_dates.given(data=st.data())
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_a_naive_or_overflowing_date_in_a_generated_request_is_refused_and_stores_nothing(
    case, data
):
    moment = data.draw(st.one_of(_naive(), _beyond_utc()), label="moment")
    if case.path.endswith("/search"):  # GET, or POST with the same fields in its body
        name = data.draw(st.sampled_from(["since", "until"]), label="parameter")
        if case.method == "GET":
            case.query = {**(case.query or {}), name: moment}
            where = ["query", name]
        else:
            case.body = {**(case.body if isinstance(case.body, dict) else {}), name: moment}
            where = ["body", name]
    elif case.method in ("POST", "PATCH"):
        case.body = {**(case.body if isinstance(case.body, dict) else {}), "expires_at": moment}
        where = ["body", "expires_at"]
    else:  # GET /memories and GET /memories/{id} take no date
        return
    before = _stored()

    response = _call_with_key(case)

    case.validate_response(response, checks=DOCUMENTED)
    assert response.status_code in (404, 422), response.text
    if response.status_code == 422:
        assert where in [error["loc"] for error in response.json()["errors"]]
    assert _stored() == before
