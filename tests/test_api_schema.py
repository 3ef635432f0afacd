"""The OpenAPI document is valid and the error shape is the same everywhere."""

from __future__ import annotations

import pytest
from openapi_spec_validator import validate

from memory.validation import InvalidInput

pytestmark = pytest.mark.django_db


def test_the_openapi_schema_validates(client):
    schema = client.get("/api/v1/openapi.json").json()
    validate(schema)
    assert {"/api/v1/health", "/api/v1/sessions/{session_id}/messages", "/api/v1/memories"} <= set(
        schema["paths"]
    )
    assert schema["components"]["securitySchemes"]["ApiKeyAuth"]["scheme"] == "bearer"


def test_an_unexpected_error_is_json_without_internals(api, monkeypatch, caplog):
    def explode(**kwargs):
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr("memory.messages.messages_add", explode)
    response = api.post("/sessions/s1/messages", {"role": "user", "content": "x"})

    assert response.status_code == 500
    assert response.json() == {"detail": "internal server error", "errors": []}
    assert "secret internal detail" in caplog.text  # logged for the operator


def test_responses_carry_chinese_as_utf8_text(api):
    response = api.post("/sessions/s1/messages", {"role": "user", "content": "我的偏好"})
    assert "我的偏好".encode() in response.content
    assert response["Content-Type"] == "application/json; charset=utf-8"


def test_a_body_that_is_not_an_object_and_an_unknown_path_answer_json(api):
    response = api.post("/sessions/s1/context", [None, None])
    assert response.status_code == 400
    assert response.json() == {
        "detail": "the body is not a JSON object",
        "errors": [{"loc": ["body"], "msg": "the body must be a JSON object"}],
    }
    for method in ("get", "post", "delete"):
        response = getattr(api, method)("/memories/not-a-number")
        assert (response.status_code, response.json()) == (
            404,
            {"detail": "Not Found", "errors": []},
        )


def test_a_domain_error_naming_no_field_still_lists_one_error(api, monkeypatch):
    def refuse(**kwargs):
        raise InvalidInput("this combination is not allowed")

    monkeypatch.setattr("memory.messages.messages_add", refuse)
    response = api.post("/sessions/s1/messages", {"role": "user", "content": "x"})

    assert response.status_code == 422
    assert response.json() == {
        "detail": "this combination is not allowed",
        "errors": [{"loc": [], "msg": "this combination is not allowed"}],
    }
