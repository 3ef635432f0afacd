"""WSGI entry point, served by gunicorn (see Procfile)."""

import logging
import os

from django.core.wsgi import get_wsgi_application
from django.db import DatabaseError, connection

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "orca_memory.settings")

application = get_wsgi_application()


def _say_loudly_if_the_database_is_unavailable() -> None:
    """At start-up, so an operator sees it at once rather than at the first failed request."""
    from django.conf import settings

    try:
        connection.ensure_connection()
    except DatabaseError as exc:
        fallback = (
            f"messages are kept in {settings.ORCA.data_dir / 'jsonl'} until it is back "
            "(then run `manage.py migrate_jsonl` on that folder)"
            if settings.ORCA.jsonl_backup
            else "messages are refused (set ORCA_JSONL_BACKUP=1 to keep them in JSONL files)"
        )
        logging.getLogger("orca_memory").critical(
            "THE DATABASE %s CANNOT BE OPENED (%s): %s", settings.ORCA.db_path, exc, fallback
        )
    finally:
        connection.close()


def _warm_up_the_local_model() -> None:
    """Load the local embedding model in the background of each server process, at start: a
    request never loads it (until it is loaded, search and context are lexical and say why)."""
    from memory.embeddings import LocalEmbedder, configured_embedder

    embedder = configured_embedder()
    if isinstance(embedder, LocalEmbedder):
        embedder.warm_up()


def _load_the_mcp_server() -> None:
    """At start, not at the first /mcp request (the MCP SDK takes seconds to import on a busy
    machine); orca_memory.urls imports it only when used, for manage.py's sake."""
    import memory.mcp_server  # noqa: F401


_say_loudly_if_the_database_is_unavailable()
_warm_up_the_local_model()
_load_the_mcp_server()
