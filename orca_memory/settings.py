"""Django settings. Product configuration comes from `orca_memory.core.config` (config.toml and
the environment)."""

from __future__ import annotations

import os
import sys
import tomllib
from datetime import timedelta
from pathlib import Path

from orca_memory.core.config import ConfigError, load_config, postgres_settings
from orca_memory.core.files import PRIVATE_DIR_MODE, make_private, private_dir, shared_secret

BASE_DIR = Path(__file__).resolve().parent.parent
# The service's version, as pyproject.toml says it (the MCP server reports it to clients).
VERSION = tomllib.loads((BASE_DIR / "pyproject.toml").read_text())["project"]["version"]

try:
    ORCA = load_config()
except ConfigError as exc:
    # Fail before Django starts, with the file and line, not a traceback into settings.
    sys.exit(f"orca-memory: configuration error: {exc}")

# The data folder holds every conversation: 0700 when created (with any missing parent,
# such as ~/.orca), and made 0700 if an earlier version left it open to other users.
private_dir(ORCA.data_dir)
if make_private(ORCA.data_dir, mode=PRIVATE_DIR_MODE):
    print(f"orca-memory: made {ORCA.data_dir} private (mode 0700)", file=sys.stderr)
private_dir(ORCA.db_path.parent)


def _secret_key() -> str:
    """ORCA_SECRET_KEY, else a key generated once and kept (mode 0600) in the data dir."""
    if key := os.environ.get("ORCA_SECRET_KEY"):
        return key
    return shared_secret(ORCA.data_dir / "secret_key")


def _environ(name: str, default: str) -> str:
    """The variable, or `default` when it is unset or empty: an empty variable counts as
    unset, as for every setting (README, Configuration). `ORCA_ALLOWED_HOSTS=` would
    otherwise refuse every request, and `ORCA_LOG_LEVEL=` stop the start."""
    return os.environ.get(name) or default


SECRET_KEY = _secret_key()
DEBUG = os.environ.get("ORCA_DEBUG", "") == "1"
ALLOWED_HOSTS = [
    host.strip()
    for host in _environ("ORCA_ALLOWED_HOSTS", "127.0.0.1,localhost").split(",")
    if host.strip()
]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "orca_memory.apps.SignInThrottlingConfig",  # axes: sign-in throttling (AXES_* below)
    # Serves the API docs' Swagger UI from static files rather than a CDN (no network needed).
    "ninja",
    "memory",
    "subagents",
    # After memory: memory's `db_worker` command replaces this package's (see its docstring).
    "orca_memory.apps.BackgroundTasksConfig",  # django_tasks_db, its name translated
]

# A form without a valid token: the site's page saying what to do (templates/403_csrf.html).
CSRF_FAILURE_VIEW = "orca_memory.core.pages.csrf_failure"

MIDDLEWARE = [
    # First, so that every error under /api/ leaves in the API's JSON shape.
    "orca_memory.core.errors.ApiErrorsAsJson",
    # As first, for /mcp: its errors leave as JSON-RPC errors.
    "orca_memory.core.errors.McpErrorsAsJsonRpc",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The dashboard's language: the switch's cookie, else the browser's Accept-Language, else
    # English (URLs carry no language prefix). The API's JSON messages stay English.
    "orca_memory.middleware.DashboardLocaleMiddleware",
    # After the language is chosen: its 400 page is in the visitor's language.
    "orca_memory.middleware.Utf8PathMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: it turns a locked-out sign-in into the lockout page.
    "axes.middleware.AxesMiddleware",
]

# Sign-in throttling (django-axes), for the dashboard's and the admin's login alike: after 5
# failed attempts for one username from one address, that pair is refused for 15 minutes
# (each attempt during the lockout starts the 15 minutes again); a success clears the count.
# The address is REMOTE_ADDR: behind a reverse proxy every client shares the proxy's.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: refuses a locked-out pair before the rest
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = 5
AXES_COOLOFF_TIME = timedelta(minutes=15)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_VERBOSE = False  # no banner on every manage.py command; lockouts are still logged

ROOT_URLCONF = "orca_memory.urls"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
WSGI_APPLICATION = "orca_memory.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.i18n",
                "orca_memory.core.pages.navigation",
                "memory.views.embedding_configured",
            ],
        },
    },
]

# Every SQLite connection: WAL, so readers never wait for the writer; NORMAL sync (durable in
# WAL mode but for a power loss); writers queue behind each other (IMMEDIATE transactions) and a
# 10 s busy timeout absorbs bursts of concurrent API calls and background embedding without
# "database is locked"; memory-mapped reads make every read of vec0's storage faster: its
# exact scan (inside a transaction, and wherever the derived vector index, memory.index_numpy,
# does not answer), that index's loading and a large agent's graph build (docs/BENCHMARKS.md,
# "Limits to keep in mind"; the map is address space, not RSS).
SQLITE_INIT_COMMAND = (
    "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 10000; "
    f"PRAGMA mmap_size = {1 << 30}"
)
SQLITE_DATABASE = {
    "ENGINE": "orca_memory.core.db",
    "NAME": ORCA.db_path,
    # Writers take the lock when the transaction begins, so two writers never deadlock
    # upgrading a read lock; the busy timeout makes them queue.
    "OPTIONS": {"transaction_mode": "IMMEDIATE", "init_command": SQLITE_INIT_COMMAND},
    # Kept between requests and tasks: opening one registers Django's functions, loads
    # sqlite-vec and runs the PRAGMAs above, and closing the last one checkpoints the WAL; per
    # request, that was a large share of a message's CPU in the server (docs/BENCHMARKS.md,
    # "Single writes: connections kept, a lighter load client").
    "CONN_MAX_AGE": 60,
    "TEST": {"NAME": ORCA.data_dir / "test_orca.db"},
}
# ORCA_DATABASE_URL selects PostgreSQL (docs/DEPLOYMENT.md). Connections are kept between
# requests, checked before reuse, so a server restart costs one failed check, not an error.
DATABASES = {
    "default": (
        {**postgres_settings(ORCA.database_url), "CONN_MAX_AGE": 60, "CONN_HEALTH_CHECKS": True}
        if ORCA.database_url
        else SQLITE_DATABASE
    )
}
# Migration operations marked with hints={"vendor": ...} run on that engine only.
DATABASE_ROUTERS = ["orca_memory.routers.EngineRouter"]

# The content limit (ORCA_MAX_CONTENT_BYTES) counts the UTF-8 bytes of the decoded text, and
# the metadata limit (ORCA_MAX_METADATA_BYTES) those of its compact JSON; the body carries both
# JSON-escaped, which most clients do for everything beyond ASCII (json.dumps' default): an
# emoji's 4 bytes become 12 (\ud83d\ude00), a control character's 1 byte 6 (\u0001). The body
# cap leaves room for the worst, so that any message within the limits gets through however it
# is escaped, and the API answers 413 for content or metadata over them.
JSON_ESCAPE_FACTOR = 6
DATA_UPLOAD_MAX_MEMORY_SIZE = (
    JSON_ESCAPE_FACTOR * (ORCA.max_content_bytes + ORCA.max_metadata_bytes) + 64 * 1024
)
NINJA_PAGINATION_CLASS = "orca_memory.pagination.BoundedLimitOffsetPagination"

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}

LANGUAGE_CODE = "en"
# The dashboard's languages (README, Dashboard): English, and Simplified Chinese from
# locale/zh_Hans/LC_MESSAGES/django.po, compiled to .mo by `make install`.
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"  # collectstatic output, built by `make run`
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": _environ("ORCA_LOG_LEVEL", "INFO")},
    # The MCP SDK logs every request of /mcp at INFO (the manager and transport each stateless
    # request makes and ends); its warnings and errors still show.
    "loggers": {"mcp": {"level": "WARNING"}},
}
