"""The API's pagination: django-ninja's limit/offset, with the offset bounded.

An offset beyond SQLite's 64-bit integers failed in the database ("datatype mismatch", a
500, found by schemathesis); no real list comes near the bound.
"""

from __future__ import annotations

from ninja import Field, Schema
from ninja.pagination import LimitOffsetPagination

MAX_OFFSET = 2**31 - 1


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    class Input(Schema):
        limit: int = Field(50, ge=1, le=500)
        offset: int = Field(0, ge=0, le=MAX_OFFSET)
