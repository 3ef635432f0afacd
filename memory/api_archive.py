"""The API key's agent's archive: `GET /export` streams it, `POST /import` takes one
(memory.archive; the format is docs/ARCHIVE.md's). Mounted at /api/v1/ by orca_memory.api.
"""

# No `from __future__ import annotations`: django-ninja reads the annotations (memory/api.py).
import tempfile

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, StreamingHttpResponse
from ninja import Router, Schema, Status

from memory.archive import export_lines, import_archive

router = Router(tags=["archive"])

ARCHIVE_TYPE = "application/x-ndjson"
# Spooled in memory up to this size, on disk beyond it.
SPOOL_BYTES = 8 * 1024 * 1024
CHUNK_BYTES = 1024 * 1024


class ImportOut(Schema):
    agent_id: str
    counts: dict[str, int]
    left_out: dict[str, int]
    vectors_reused: bool
    waiting_for_embedding: int


@router.get("/export", response={200: None})
def export_archive(request: HttpRequest) -> StreamingHttpResponse:
    """The key's agent's whole memory as one archive (JSON Lines), streamed."""
    response = StreamingHttpResponse(export_lines(request.auth), content_type=ARCHIVE_TYPE)
    response["Content-Disposition"] = 'attachment; filename="orca-archive.jsonl"'
    return response


def _too_large() -> RequestDataTooBig:
    limit = settings.ORCA.max_import_bytes
    return RequestDataTooBig(f"the archive is larger than max_import_bytes ({limit} bytes)")


@router.post("/import", response={201: ImportOut})
def import_into_agent(request: HttpRequest) -> Status:
    """An archive (the body, as `GET /export` wrote it) into the key's agent, which must
    hold no data yet; all or nothing."""
    limit = settings.ORCA.max_import_bytes
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if declared.isdigit() and int(declared) > limit:
        raise _too_large()
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as body:
        size = 0
        while chunk := request.read(CHUNK_BYTES):
            size += len(chunk)
            if size > limit:
                raise _too_large()
            body.write(chunk)
        body.seek(0)
        report = import_archive(body, agent_id=request.auth)
    return Status(201, report.__dict__)
