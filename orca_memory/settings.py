"""Django settings. Product configuration comes from `orca_memory.config` (config.toml + env)."""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

from orca_memory.config import ConfigError, load_config

BASE_DIR = Path(__file__).resolve().parent.parent

try:
    ORCA = load_config()
except ConfigError as exc:
    # Fail before Django starts, with the file and line, not a traceback into settings.
    sys.exit(f"orca-memory: configuration error: {exc}")

ORCA.data_dir.mkdir(parents=True, exist_ok=True)
ORCA.db_path.parent.mkdir(parents=True, exist_ok=True)


def _secret_key() -> str:
    """ORCA_SECRET_KEY, else a key generated once and kept (mode 0600) in the data dir."""
    if key := os.environ.get("ORCA_SECRET_KEY"):
        return key
    path = ORCA.data_dir / "secret_key"
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(50))
    return path.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = os.environ.get("ORCA_DEBUG", "") == "1"
ALLOWED_HOSTS = [
    host.strip()
    for host in os.environ.get("ORCA_ALLOWED_HOSTS", "127.0.0.1,localhost").split(",")
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
    # Serves the API docs' Swagger UI from static files rather than a CDN (no network needed).
    "ninja",
    "memory",
    "subagents",
    # After memory: memory's `db_worker` command replaces this package's (see its docstring).
    "django_tasks_db",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

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
            ],
        },
    },
]

DATABASES = {
    "default": {
        "ENGINE": "orca_memory.db",
        "NAME": ORCA.db_path,
        # Writers take the lock when the transaction begins, so two writers never deadlock
        # upgrading a read lock; the busy timeout (see orca_memory.db.base) makes them queue.
        "OPTIONS": {"transaction_mode": "IMMEDIATE"},
        "TEST": {"NAME": ORCA.data_dir / "test_orca.db"},
    }
}
# Requests may carry content up to ORCA_MAX_CONTENT_BYTES; JSON escaping (\uXXXX) can double
# it, so Django's own cap sits above that and the API answers 413 for content over the limit.
DATA_UPLOAD_MAX_MEMORY_SIZE = 2 * ORCA.max_content_bytes + 64 * 1024
NINJA_PAGINATION_CLASS = "orca_memory.pagination.BoundedLimitOffsetPagination"

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}

LANGUAGE_CODE = "en-us"
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
    "root": {"handlers": ["console"], "level": os.environ.get("ORCA_LOG_LEVEL", "INFO")},
}
