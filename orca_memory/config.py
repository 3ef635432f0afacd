"""Configuration: `~/.orca/config.toml`, overridden by environment variables.

Every setting has one row in `SETTINGS` below: its TOML section and key, its type and its
default; its environment variable is SECTION_KEY in capitals (`[orca] db_path` is ORCA_DB_PATH).
README.md lists the same rows for operators.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit


class ConfigError(Exception):
    """A configuration file or variable that cannot be used; the message names where it is."""


@dataclass(frozen=True)
class Config:
    home: Path
    config_file: Path
    data_dir: Path
    db_path: Path
    # A URL may carry the database password.
    database_url: str | None = field(repr=False)
    model_window: int
    embedding_provider: str
    embedding_dim: int
    # None: the provider's own (memory.embeddings: 5 for a remote API, more for the local model).
    embedding_batch_size: int | None
    max_content_bytes: int
    max_metadata_bytes: int
    long_term_cap: int
    vector_cache_mb: int
    jsonl_backup: bool
    # The key authenticates every SiliconFlow call: keep it out of repr(), logs and pages.
    siliconflow_api_key: str | None = field(repr=False)
    siliconflow_base_url: str
    siliconflow_embedding_model: str
    siliconflow_chat_model: str
    openai_api_key: str | None = field(repr=False)
    openai_base_url: str | None
    openai_embedding_model: str | None


def _positive_int(value: str) -> int:
    number = int(value)
    if number <= 0:
        raise ValueError(f"{value!r} is not a positive integer")
    return number


def _non_negative_int(value: str) -> int:
    number = int(value)
    if number < 0:
        raise ValueError(f"{value!r} is not a non-negative integer")
    return number


def _path(value: str) -> Path:
    return Path(value).expanduser()


def postgres_settings(url: str) -> dict[str, Any]:
    """Django's DATABASES entry for a `postgres://` or `postgresql://` URL.

    libpq's forms work too: a Unix socket directory as `?host=/run/postgresql` (the URL's host
    left empty), an empty password (`postgresql://orca:@/orca?host=...`), the database as
    `?dbname=`; any other query parameter (`sslmode=require`, `connect_timeout=5`...) goes to
    libpq unchanged.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql"):
        raise ValueError("use a postgres:// or postgresql:// URL")
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    port = parts.port  # ValueError for a port that is not a number
    name = unquote(parts.path.lstrip("/")) or options.pop("dbname", "")
    if not name:
        raise ValueError("name the database in the URL's path: postgresql://host/orca")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": unquote(parts.username or "") or options.pop("user", ""),
        "PASSWORD": unquote(parts.password or "") or options.pop("password", ""),
        "HOST": options.pop("host", "") or unquote(parts.hostname or ""),
        "PORT": str(port or options.pop("port", "")),
        "OPTIONS": options,
    }


def _database_url(value: str) -> str:
    postgres_settings(value)
    return value


EMBEDDING_PROVIDERS = ("auto", "siliconflow", "openai", "local", "none")


def _provider(value: str) -> str:
    if value not in EMBEDDING_PROVIDERS:
        raise ValueError(f"choose one of {', '.join(EMBEDDING_PROVIDERS)}")
    return value


def _flag(value: str) -> bool:
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError("use true or false")


def _text(value: str) -> str:
    if not value.strip():
        raise ValueError("it is empty")
    return value


@dataclass(frozen=True)
class Setting:
    section: str
    key: str
    parse: Callable[[str], Any]
    default: Any  # a value, or a function of the settings resolved before this one
    secret: bool = False  # never repeated in an error message

    @property
    def env(self) -> str:
        return f"{self.section}_{self.key}".upper()

    @property
    def attribute(self) -> str:
        return self.key if self.section == "orca" else f"{self.section}_{self.key}"


SETTINGS: tuple[Setting, ...] = (
    Setting("orca", "data_dir", _path, lambda resolved: resolved["home"] / "data"),
    Setting("orca", "db_path", _path, lambda resolved: resolved["data_dir"] / "orca.db"),
    Setting("orca", "database_url", _database_url, None, secret=True),
    Setting("orca", "model_window", _positive_int, 8192),
    Setting("orca", "embedding_provider", _provider, "auto"),
    Setting("orca", "embedding_dim", _positive_int, 1024),
    Setting("orca", "embedding_batch_size", _positive_int, None),
    Setting("orca", "max_content_bytes", _positive_int, 1024 * 1024),
    Setting("orca", "max_metadata_bytes", _positive_int, 64 * 1024),
    Setting("orca", "long_term_cap", _positive_int, 10_000),
    Setting("orca", "vector_cache_mb", _non_negative_int, 512),
    Setting("orca", "jsonl_backup", _flag, False),
    Setting("siliconflow", "api_key", _text, None, secret=True),
    Setting("siliconflow", "base_url", _text, "https://api.siliconflow.cn/v1"),
    Setting("siliconflow", "embedding_model", _text, "Pro/BAAI/bge-m3"),
    Setting("siliconflow", "chat_model", _text, "Qwen/Qwen2.5-7B-Instruct"),
    Setting("openai", "api_key", _text, None, secret=True),
    Setting("openai", "base_url", _text, None),
    Setting("openai", "embedding_model", _text, None),
)


def _check_provider(config: Config) -> None:
    """Settings a chosen provider cannot work without; 'auto' picks only what is complete."""
    where = f"embedding_provider = {config.embedding_provider!r} (in {config.config_file} or env)"
    if config.embedding_provider == "siliconflow" and not config.siliconflow_api_key:
        raise ConfigError(f"{where} needs [siliconflow] api_key or SILICONFLOW_API_KEY")
    if config.embedding_provider == "openai" and not (
        config.openai_base_url and config.openai_embedding_model
    ):
        raise ConfigError(
            f"{where} needs [openai] base_url and embedding_model "
            "(OPENAI_BASE_URL, OPENAI_EMBEDDING_MODEL)"
        )


def _read_file(path: Path) -> dict[str, dict[str, Any]]:
    try:
        with path.open("rb") as f:
            document = tomllib.load(f)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message ends with "(at line L, column C)".
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    known: dict[str, set[str]] = {}
    for setting in SETTINGS:
        known.setdefault(setting.section, set()).add(setting.key)
    for section, table in document.items():
        if section not in known or not isinstance(table, dict):
            raise ConfigError(f"{path}: unknown section [{section}] (known: {', '.join(known)})")
        unknown = sorted(set(table) - known[section])
        if unknown:
            raise ConfigError(
                f"{path}: unknown key {unknown[0]!r} in [{section}] "
                f"(known: {', '.join(sorted(known[section]))})"
            )
    return document


def _parse(setting: Setting, raw: Any, where: str) -> Any:
    # TOML gives typed values; the environment gives strings. Parse both from text so a
    # setting means the same wherever it comes from.
    if isinstance(raw, bool) and setting.parse is _flag:
        return raw
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        raise ConfigError(f"{where}: expected a string or a number, got {type(raw).__name__}")
    try:
        return setting.parse(str(raw))
    except ValueError as exc:
        shown = "" if setting.secret else f" {raw!r}"
        raise ConfigError(f"{where}: invalid value{shown} ({exc})") from exc


def load_config(env: Mapping[str, str] | None = None) -> Config:
    """Defaults, then `$ORCA_HOME/config.toml` (default `~/.orca`), then the environment."""
    env = os.environ if env is None else env
    home = Path(env.get("ORCA_HOME") or "~/.orca").expanduser()
    config_file = home / "config.toml"
    document = _read_file(config_file)
    values: dict[str, Any] = {"home": home, "config_file": config_file}
    for setting in SETTINGS:
        if env.get(setting.env):
            raw, where = env[setting.env], f"environment variable {setting.env}"
        elif setting.key in document.get(setting.section, {}):
            raw = document[setting.section][setting.key]
            where = f"{config_file}: [{setting.section}] {setting.key}"
        else:
            default = setting.default
            values[setting.attribute] = default(values) if callable(default) else default
            continue
        values[setting.attribute] = _parse(setting, raw, where)
    config = Config(**values)
    _check_provider(config)
    return config
