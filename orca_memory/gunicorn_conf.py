"""gunicorn's configuration (`gunicorn --config python:orca_memory.gunicorn_conf`, see Procfile).

- The access log names each request by its path alone: query strings carry what people and
  agents search for (`GET /api/v1/search?q=...`, the dashboard's `?q=`), and a log is read by
  more people, and kept longer, than the database.
- The embedding provider is resolved once, in the master (`on_starting`), and handed to every
  worker, including those gunicorn starts later in place of one that died: installing the
  local model under a running server changes nothing until it restarts.
- No control socket: gunicorn's default is one path per user (`$XDG_RUNTIME_DIR/gunicorn.ctl`
  or `~/.gunicorn/gunicorn.ctl`), shared by every gunicorn of that user on the host, and
  stopping any of them deletes it for all. The service is stopped with its signals (Ctrl-C in
  `make run`), never through `gunicornc`.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from gunicorn.glogging import Logger

accesslog = "-"
control_socket_disable = True


def without_query(url: str) -> str:
    """The URL or path without its query string and fragment."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


class PathOnlyAccessLogger(Logger):
    """gunicorn's logger, with every access-log field that could hold a query string cut."""

    def atoms(
        self, resp: Any, req: Any, environ: dict[str, Any], request_time: timedelta
    ) -> dict[str, Any]:
        atoms = super().atoms(resp, req, environ, request_time)
        path = without_query(environ.get("RAW_URI") or environ.get("PATH_INFO") or "")
        atoms["r"] = f"{environ['REQUEST_METHOD']} {path} {environ['SERVER_PROTOCOL']}"
        atoms["q"] = ""
        # A page's address is the Referer of the requests it makes (htmx, static files).
        for referer in ("f", "{referer}i", "{hx-current-url}i"):
            if atoms.get(referer, "-") != "-":
                atoms[referer] = without_query(atoms[referer])
        for name in ("{raw_uri}e", "{query_string}e", "{http_referer}e", "{http_hx_current_url}e"):
            atoms.pop(name, None)
        return atoms


logger_class = PathOnlyAccessLogger


def on_starting(server: Any) -> None:
    """In the master, before any worker: the provider `auto` stands for now, for all of them."""
    from memory.embeddings import resolve_provider
    from orca_memory.core.config import ConfigError, load_config

    try:
        provider = resolve_provider(load_config())
    except ConfigError:
        return  # each worker stops with the message that names the problem
    os.environ["EMBEDDING_PROVIDER"] = provider
    server.log.info("Embedding provider: %s", provider)
