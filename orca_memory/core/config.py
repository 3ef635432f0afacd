"""Configuration: `~/.orca/config.toml`, overridden by environment variables.

Every setting has one row in `SETTINGS` below: its TOML section and key, its type and its
default; its environment variable is SECTION_KEY in capitals (`[orca] db_path` is ORCA_DB_PATH).
README.md lists the same rows for operators.

The chat model (`[llm]`) and the embedding provider (`[embedding]`) are resolved from their
rows together: a provider preset fills the endpoint and model it implies, and the keys those
sections replaced (`[siliconflow]`, `[openai]`, `[orca] embedding_*`) are still read where the
new key is not set, with a notice (`Config.legacy_notice`). For each key the environment wins
over the file, and within each the new key over the old one.

One value is not a setting: the URL of the local PostgreSQL server that `manage.py
local_postgres` (`make run-postgres`) started, recorded in `$ORCA_HOME/local_postgres.url` and
used when neither ORCA_DATABASE_URL nor `[orca] database_url` names a database, so that every
later command with that home finds the same database (`local_postgres --forget` returns it to
SQLite).
"""

from __future__ import annotations

import logging
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from orca_memory.core.files import open_private

logger = logging.getLogger(__name__)


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
    max_content_bytes: int
    max_metadata_bytes: int
    # The largest archive POST /import takes (memory.archive); manage.py import_agent has none.
    max_import_bytes: int
    long_term_cap: int
    vector_cache_mb: int
    text_index_mb: int
    jsonl_backup: bool
    # The chat model: "none" (offline summaries and extraction), a preset of LLM_PRESETS, or
    # "custom" (base_url alone names the server). Base URL and model are known unless "none".
    llm_provider: str
    llm_base_url: str | None
    # Keys authenticate every call to a provider: keep them out of repr(), logs and pages.
    llm_api_key: str | None = field(repr=False)
    llm_model: str | None
    llm_timeout_seconds: int
    # As configured: "auto" is resolved by memory.embeddings.resolve_provider.
    embedding_provider: str
    # A remote model's name, or the bundled local model's (None: the provider's default).
    embedding_model: str | None
    embedding_base_url: str | None
    embedding_api_key: str | None = field(repr=False)
    # [embedding] dimension: the remote model's vector size (the local models have their own;
    # the size of a new database's first, empty vector tables).
    embedding_dim: int
    # None: the provider's own (memory.embeddings: 5 for a remote API, more for the local model).
    embedding_batch_size: int | None
    # The old keys this configuration still uses, and the new ones to write instead (logged
    # once as each process starts, by `log_legacy_notice`).
    legacy_notice: str | None = None
    # Whether database_url is the local server's recorded by `manage.py local_postgres`.
    database_url_recorded: bool = False


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


@dataclass(frozen=True)
class Preset:
    """What a provider's name implies: its endpoint, and a model when it has a default."""

    base_url: str
    model: str | None = None
    needs_api_key: bool = False


SILICONFLOW_URL = "https://api.siliconflow.cn/v1"
# The chat model's presets; an explicit base_url always wins over the preset's.
LLM_PRESETS = {
    "siliconflow": Preset(SILICONFLOW_URL, "Qwen/Qwen2.5-7B-Instruct", needs_api_key=True),
    "openai": Preset("https://api.openai.com/v1", needs_api_key=True),
    "ollama": Preset("http://127.0.0.1:11434/v1"),
    "vllm": Preset("http://127.0.0.1:8000/v1"),
    "llamacpp": Preset("http://127.0.0.1:8080/v1"),
}
LLM_PROVIDERS = (*LLM_PRESETS, "custom", "none")
# The `siliconflow` embedding provider; `openai` is any OpenAI-compatible endpoint. Both names
# are part of the vector signature stored with a database's vectors (memory.vectors).
SILICONFLOW_EMBEDDING = Preset(SILICONFLOW_URL, "Pro/BAAI/bge-m3", needs_api_key=True)
SILICONFLOW_DIMENSION = 1024
# The vector size when nothing sets one: bge-m3's, the size of the tables a new database is
# made with before its first vectors (the local models rebuild them for their own size).
DEFAULT_DIMENSION = 1024
EMBEDDING_PROVIDERS = ("auto", "siliconflow", "openai", "local", "none")


def _choice(choices: tuple[str, ...]) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if value not in choices:
            raise ValueError(f"choose one of {', '.join(choices)}")
        return value

    return parse


def _url(value: str) -> str:
    if urlsplit(value).scheme not in ("http", "https") or not urlsplit(value).netloc:
        raise ValueError("use an http:// or https:// URL")
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
    # An old key, still read: the new keys to write instead.
    replaced_by: str | None = None

    @property
    def resolved(self) -> bool:
        """Read for `_llm` and `_embedding`, which resolve presets and old keys, rather than
        set as an attribute of its own."""
        return self.replaced_by is not None or self.section in ("llm", "embedding")

    @property
    def env(self) -> str:
        return f"{self.section}_{self.key}".upper()

    @property
    def name(self) -> str:
        return f"[{self.section}] {self.key}"

    @property
    def attribute(self) -> str:
        return self.key if self.section == "orca" else f"{self.section}_{self.key}"


SETTINGS: tuple[Setting, ...] = (
    Setting("orca", "data_dir", _path, lambda resolved: resolved["home"] / "data"),
    Setting("orca", "db_path", _path, lambda resolved: resolved["data_dir"] / "orca.db"),
    Setting("orca", "database_url", _database_url, None, secret=True),
    Setting("orca", "model_window", _positive_int, 8192),
    Setting("orca", "max_content_bytes", _positive_int, 1024 * 1024),
    Setting("orca", "max_metadata_bytes", _positive_int, 64 * 1024),
    Setting("orca", "max_import_bytes", _positive_int, 256 * 1024 * 1024),
    Setting("orca", "long_term_cap", _positive_int, 10_000),
    # An agent of 100k messages at 1,024 dimensions: a 445 MiB matrix and its 274 MiB graph.
    Setting("orca", "vector_cache_mb", _non_negative_int, 1024),
    # An agent of 100k messages: about 60 MiB of posting lists; of 1M, about 600.
    Setting("orca", "text_index_mb", _non_negative_int, 1024),
    Setting("orca", "jsonl_backup", _flag, False),
    # The defaults of [llm] and [embedding] depend on the provider: see _llm and _embedding.
    Setting("llm", "provider", _choice(LLM_PROVIDERS), None),
    Setting("llm", "base_url", _url, None),
    Setting("llm", "api_key", _text, None, secret=True),
    Setting("llm", "model", _text, None),
    Setting("llm", "timeout_seconds", _positive_int, None),
    Setting("embedding", "provider", _choice(EMBEDDING_PROVIDERS), None),
    Setting("embedding", "model", _text, None),
    Setting("embedding", "base_url", _url, None),
    Setting("embedding", "api_key", _text, None, secret=True),
    Setting("embedding", "dimension", _positive_int, None),
    Setting("embedding", "batch_size", _positive_int, None),
    # The keys [llm] and [embedding] replaced.
    Setting(
        "orca",
        "embedding_provider",
        _choice(EMBEDDING_PROVIDERS),
        None,
        replaced_by="[embedding] provider",
    ),
    Setting("orca", "embedding_dim", _positive_int, None, replaced_by="[embedding] dimension"),
    Setting(
        "orca", "embedding_batch_size", _positive_int, None, replaced_by="[embedding] batch_size"
    ),
    Setting(
        "siliconflow",
        "api_key",
        _text,
        None,
        secret=True,
        replaced_by='[embedding] api_key and [llm] api_key, with provider = "siliconflow"',
    ),
    Setting(
        "siliconflow", "base_url", _text, None, replaced_by="[embedding] base_url, [llm] base_url"
    ),
    Setting("siliconflow", "embedding_model", _text, None, replaced_by="[embedding] model"),
    Setting("siliconflow", "chat_model", _text, None, replaced_by="[llm] model"),
    Setting("openai", "api_key", _text, None, secret=True, replaced_by="[embedding] api_key"),
    Setting(
        "openai",
        "base_url",
        _text,
        None,
        replaced_by='[embedding] base_url, with provider = "openai"',
    ),
    Setting("openai", "embedding_model", _text, None, replaced_by="[embedding] model"),
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


@dataclass(frozen=True)
class Found:
    """A setting's value as read, and where from (for messages)."""

    setting: Setting
    value: Any
    where: str
    from_env: bool

    def said(self) -> str:
        """Where the value is set, with the value unless it is secret."""
        return self.where if self.setting.secret else f"{self.where} = {self.value!r}"


Values = dict[tuple[str, str], Found]


def _first(found: Values, *keys: tuple[str, str]) -> Found | None:
    """The first of the keys set in the environment, else the first set in the file: callers
    name the new key before the old ones it replaced."""
    present = [found[key] for key in keys if key in found]
    return next((f for f in present if f.from_env), None) or next(iter(present), None)


def _value(found: Found | None, default: Any = None) -> Any:
    return default if found is None else found.value


LLM_TIMEOUT_SECONDS = 60
NO_LLM = {"llm_provider": "none", "llm_base_url": None, "llm_api_key": None, "llm_model": None}


def _llm(found: Values) -> dict[str, Any]:
    """[llm], with [siliconflow] read where it is unset: a SiliconFlow key alone still
    selects SiliconFlow's chat model, as before [llm] existed."""
    provider = _first(found, ("llm", "provider"))
    base_url = _first(found, ("llm", "base_url"))
    old_key = _first(found, ("siliconflow", "api_key"))
    timeout = {
        "llm_timeout_seconds": _value(found.get(("llm", "timeout_seconds")), LLM_TIMEOUT_SECONDS)
    }
    if provider is not None:
        name, chosen = provider.value, provider.said()
    elif base_url is not None:
        name, chosen = "custom", base_url.said()
    elif old_key is not None:
        name, chosen = "siliconflow", old_key.said()
    else:
        return NO_LLM | timeout
    if name == "none":
        return NO_LLM | timeout
    # [siliconflow] holds SiliconFlow's settings: no other provider reads it.
    old = {"base_url": "base_url", "model": "chat_model", "api_key": "api_key"}
    base_url, model, api_key = (
        _first(found, ("llm", key), *([("siliconflow", old[key])] if name == "siliconflow" else []))
        for key in ("base_url", "model", "api_key")
    )
    preset = LLM_PRESETS.get(name, Preset(""))
    missing = [
        f"[llm] {key} (LLM_{key.upper()})"
        for key, given, needed in (
            ("base_url", base_url, not preset.base_url),
            ("model", model, not preset.model),
            ("api_key", api_key, preset.needs_api_key),
        )
        if given is None and needed
    ]
    if missing:
        raise ConfigError(f"{chosen} needs {' and '.join(missing)}")
    return timeout | {
        "llm_provider": name,
        "llm_base_url": _value(base_url, preset.base_url),
        "llm_api_key": _value(api_key),
        "llm_model": _value(model, preset.model),
    }


def _embedding(found: Values) -> dict[str, Any]:
    """[embedding], with [orca] embedding_*, [siliconflow] and [openai] read where it is
    unset. `auto` is left for memory.embeddings.resolve_provider (a base_url: `openai`, else
    `local`), except that a SiliconFlow key alone selects `siliconflow`, as it did."""
    provider = _first(found, ("embedding", "provider"), ("orca", "embedding_provider"))
    base_url = _first(found, ("embedding", "base_url"))
    api_key = _first(found, ("embedding", "api_key"))
    old_key = _first(found, ("siliconflow", "api_key"))
    name = _value(provider, "auto")
    if name == "auto" and base_url is None and api_key is None and old_key is not None:
        name, provider = "siliconflow", old_key
    dimension = _first(found, ("embedding", "dimension"), ("orca", "embedding_dim"))
    resolved = {
        "embedding_provider": name,
        "embedding_model": _value(_first(found, ("embedding", "model"))),
        "embedding_base_url": None,
        "embedding_api_key": None,
        "embedding_dim": _value(dimension, DEFAULT_DIMENSION),
        "embedding_batch_size": _value(
            _first(found, ("embedding", "batch_size"), ("orca", "embedding_batch_size"))
        ),
    }
    if name == "siliconflow":
        return resolved | _siliconflow_embedding(found, provider, dimension)
    if name == "openai" or (name == "auto" and base_url is not None):
        return resolved | _openai_embedding(found, provider or base_url, dimension)
    if name == "auto" and api_key is not None:
        raise ConfigError(
            f"{api_key.where} is set but no remote provider is: set [embedding] provider = "
            '"siliconflow" (EMBEDDING_PROVIDER), or [embedding] base_url (EMBEDDING_BASE_URL)'
        )
    if name == "none":
        resolved["embedding_model"] = None
    return resolved


def _siliconflow_embedding(found: Values, chosen: Found, dimension: Found | None) -> dict[str, Any]:
    """SiliconFlow's endpoint and bge-m3 unless set otherwise; its key is required."""
    api_key = _first(found, ("embedding", "api_key"), ("siliconflow", "api_key"))
    if api_key is None:
        raise ConfigError(f"{chosen.said()} needs [embedding] api_key (EMBEDDING_API_KEY)")
    model = _first(found, ("embedding", "model"), ("siliconflow", "embedding_model"))
    base_url = _first(found, ("embedding", "base_url"), ("siliconflow", "base_url"))
    return {
        "embedding_model": _value(model, SILICONFLOW_EMBEDDING.model),
        "embedding_base_url": _value(base_url, SILICONFLOW_EMBEDDING.base_url),
        "embedding_api_key": api_key.value,
        "embedding_dim": _value(dimension, SILICONFLOW_DIMENSION),
    }


def _openai_embedding(found: Values, chosen: Found, dimension: Found | None) -> dict[str, Any]:
    """Any OpenAI-compatible endpoint: its URL, model and vector size are required."""
    base_url = _first(found, ("embedding", "base_url"), ("openai", "base_url"))
    model = _first(found, ("embedding", "model"), ("openai", "embedding_model"))
    # [openai] never asked for a dimension: its tables were made 1024 wide.
    old_section = base_url is not None and base_url.setting.section == "openai"
    missing = [
        f"[embedding] {key} (EMBEDDING_{key.upper()})"
        for key, given, needed in (
            ("base_url", base_url, True),
            ("model", model, True),
            ("dimension", dimension, not old_section),
        )
        if given is None and needed
    ]
    if missing:
        raise ConfigError(f"{chosen.said()} needs {' and '.join(missing)}")
    api_key = _first(found, ("embedding", "api_key"), ("openai", "api_key"))
    return {
        "embedding_model": model.value,
        "embedding_base_url": base_url.value,
        "embedding_api_key": _value(api_key),
        "embedding_dim": _value(dimension, DEFAULT_DIMENSION),
    }


def _legacy_notice(found: Values) -> str | None:
    """One sentence naming each old key in use (by its variable when the environment sets
    it) and the new keys to write instead."""
    old = sorted(
        (f for f in found.values() if f.setting.replaced_by),
        key=lambda f: SETTINGS.index(f.setting),
    )
    if not old:
        return None
    uses = "; ".join(
        f"{f.setting.env if f.from_env else f.setting.name} -> {f.setting.replaced_by}" for f in old
    )
    return (
        "Configuration: old keys in use. They still work (a new key set in the same place "
        f"wins over them); write them as the new keys: {uses}"
    )


def log_legacy_notice(config: Config) -> None:
    """Log the notice about old keys, if any: each process calls it once, as it starts."""
    if config.legacy_notice:
        logger.warning(config.legacy_notice)


# `manage.py local_postgres` writes its server's URL here (in the home, beside config.toml).
RECORDED_URL_FILE = "local_postgres.url"


def record_database_url(home: Path, url: str) -> Path:
    """Keep `url` as the home's database for every later process (0600: a URL may carry a
    password); returns the file."""
    path = home / RECORDED_URL_FILE
    with os.fdopen(open_private(path, os.O_WRONLY | os.O_TRUNC), "w") as file:
        file.write(url + "\n")
    return path


def forget_database_url(home: Path) -> bool:
    """Forget the recorded URL (the server and its data are left alone); whether one was."""
    try:
        (home / RECORDED_URL_FILE).unlink()
    except FileNotFoundError:
        return False
    return True


def _recorded_url(home: Path) -> str | None:
    path = home / RECORDED_URL_FILE
    try:
        url = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    try:
        return _database_url(url)
    except ValueError as exc:
        raise ConfigError(
            f"{path}: not a database URL ({exc}); `manage.py local_postgres --forget` removes it"
        ) from exc


def load_config(env: Mapping[str, str] | None = None) -> Config:
    """Defaults, then `$ORCA_HOME/config.toml` (default `~/.orca`), then the environment; the
    recorded local server's URL where neither names a database."""
    env = os.environ if env is None else env
    home = Path(env.get("ORCA_HOME") or "~/.orca").expanduser()
    config_file = home / "config.toml"
    document = _read_file(config_file)
    values: dict[str, Any] = {"home": home, "config_file": config_file}
    found: Values = {}
    for setting in SETTINGS:
        from_env = bool(env.get(setting.env))
        if from_env:
            raw, where = env[setting.env], f"environment variable {setting.env}"
        elif setting.key in document.get(setting.section, {}):
            raw = document[setting.section][setting.key]
            where = f"{config_file}: {setting.name}"
        elif setting.resolved:
            continue
        else:
            default = setting.default
            values[setting.attribute] = default(values) if callable(default) else default
            continue
        value = _parse(setting, raw, where)
        if setting.resolved:
            found[setting.section, setting.key] = Found(setting, value, where, from_env)
        else:
            values[setting.attribute] = value
    recorded = values["database_url"] is None and (url := _recorded_url(home)) is not None
    if recorded:
        values["database_url"] = url
    return Config(
        **values,
        **_llm(found),
        **_embedding(found),
        legacy_notice=_legacy_notice(found),
        database_url_recorded=recorded,
    )
