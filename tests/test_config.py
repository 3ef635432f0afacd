"""config.toml and environment variables: precedence, defaults and clear errors."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from orca_memory.core.config import (
    RECORDED_URL_FILE,
    SETTINGS,
    ConfigError,
    forget_database_url,
    load_config,
    log_legacy_notice,
    postgres_settings,
    record_database_url,
)

ROOT = Path(__file__).resolve().parent.parent


def run_alone(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`python ARGS` in a process with ORCA_HOME=home and only `env` beside it."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env={"ORCA_HOME": str(home), "PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def write_config(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_it_has_defaults_without_a_file(tmp_path):
    config = load_config({"ORCA_HOME": str(tmp_path)})

    assert config.data_dir == tmp_path / "data"
    assert config.db_path == tmp_path / "data" / "orca.db"
    assert config.model_window == 8192
    assert (config.llm_provider, config.llm_base_url, config.llm_model) == ("none", None, None)
    assert config.llm_timeout_seconds == 60
    assert (config.embedding_provider, config.embedding_model, config.embedding_dim) == (
        "auto",
        None,
        1024,
    )
    assert (config.embedding_base_url, config.embedding_api_key) == (None, None)
    assert config.legacy_notice is None
    assert config.max_content_bytes == 1024 * 1024
    assert config.max_metadata_bytes == 64 * 1024


def test_the_metadata_limit_is_set_by_the_file_or_the_environment(tmp_path):
    write_config(tmp_path, "[orca]\nmax_metadata_bytes = 1000\n")
    assert load_config({"ORCA_HOME": str(tmp_path)}).max_metadata_bytes == 1000
    env = {"ORCA_HOME": str(tmp_path), "ORCA_MAX_METADATA_BYTES": "2048"}
    assert load_config(env).max_metadata_bytes == 2048
    with pytest.raises(ConfigError, match="ORCA_MAX_METADATA_BYTES"):
        load_config({**env, "ORCA_MAX_METADATA_BYTES": "0"})


def test_the_file_overrides_defaults_and_the_environment_overrides_the_file(tmp_path):
    write_config(
        tmp_path,
        """
[embedding]
provider = "siliconflow"
api_key = "sk-from-file"
model = "BAAI/bge-large-zh-v1.5"

[orca]
data_dir = "/srv/orca"
model_window = 32000
""",
    )
    env = {
        "ORCA_HOME": str(tmp_path),
        "EMBEDDING_API_KEY": "sk-from-env",
        "ORCA_MODEL_WINDOW": "128000",
    }

    config = load_config(env)

    assert config.embedding_api_key == "sk-from-env"
    assert config.model_window == 128000
    assert config.embedding_model == "BAAI/bge-large-zh-v1.5"
    assert config.data_dir == Path("/srv/orca")
    assert config.db_path == Path("/srv/orca/orca.db")  # derived from the file's data_dir
    assert load_config({**env, "ORCA_DB_PATH": "~/x.db"}).db_path == Path("~/x.db").expanduser()


def test_an_empty_environment_variable_does_not_override(tmp_path):
    write_config(tmp_path, '[llm]\nprovider = "ollama"\nmodel = "qwen2.5:7b"\n')
    config = load_config({"ORCA_HOME": str(tmp_path), "LLM_MODEL": "", "LLM_PROVIDER": ""})
    assert (config.llm_provider, config.llm_model) == ("ollama", "qwen2.5:7b")


@pytest.mark.slow
def test_empty_django_variables_count_as_unset(tmp_path):
    """As the configuration's: `ORCA_ALLOWED_HOSTS=` answered no host, `ORCA_LOG_LEVEL=`
    stopped every command with a ValueError from logging."""
    result = run_alone(
        tmp_path,
        "-c",
        "import logging, django; from django.conf import settings; django.setup(); "
        "print(settings.ALLOWED_HOSTS, logging.getLevelName(logging.getLogger().level))",
        DJANGO_SETTINGS_MODULE="orca_memory.settings",
        EMBEDDING_PROVIDER="none",
        ORCA_ALLOWED_HOSTS="",
        ORCA_LOG_LEVEL="",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['127.0.0.1', 'localhost'] INFO"


def test_a_malformed_file_names_the_file_and_line(tmp_path):
    path = write_config(tmp_path, '[siliconflow]\napi_key = "sk-1"\nbase_url = https://x\n')
    with pytest.raises(ConfigError) as error:
        load_config({"ORCA_HOME": str(tmp_path)})
    assert str(path) in str(error.value)
    assert "line 3" in str(error.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[siliconflow]\napi-key = "x"\n', "unknown key 'api-key' in [siliconflow]"),
        ('[anthropic]\napi_key = "x"\n', "unknown section [anthropic]"),
        ("[orca]\nmodel_window = -5\n", "[orca] model_window: invalid value -5"),
        ('[orca]\nmodel_window = "big"\n', "[orca] model_window: invalid value 'big'"),
        ("[orca]\nmodel_window = true\n", "[orca] model_window: expected a string or a number"),
        ('[siliconflow]\napi_key = ""\n', "[siliconflow] api_key: invalid value (it is empty)"),
    ],
)
def test_it_rejects_unknown_or_invalid_settings_by_name(tmp_path, text, expected):
    path = write_config(tmp_path, text)
    with pytest.raises(ConfigError) as error:
        load_config({"ORCA_HOME": str(tmp_path)})
    assert str(path) in str(error.value)
    assert expected in str(error.value)


def test_a_bad_environment_variable_is_named(tmp_path):
    with pytest.raises(ConfigError, match="environment variable ORCA_EMBEDDING_DIM"):
        load_config({"ORCA_HOME": str(tmp_path), "ORCA_EMBEDDING_DIM": "1024.5"})


@pytest.mark.parametrize(
    "env",
    [
        {"SILICONFLOW_API_KEY": "sk-secret-123"},
        {"LLM_PROVIDER": "openai", "LLM_MODEL": "gpt-4o-mini", "LLM_API_KEY": "sk-secret-123"},
        {"EMBEDDING_PROVIDER": "siliconflow", "EMBEDDING_API_KEY": "sk-secret-123"},
    ],
)
def test_the_api_keys_stay_out_of_repr(tmp_path, env):
    config = load_config({"ORCA_HOME": str(tmp_path), **env})
    assert "sk-secret-123" in (config.llm_api_key, config.embedding_api_key)
    assert "sk-secret-123" not in repr(config)
    assert "sk-secret-123" not in str(config)


def test_an_api_key_is_never_repeated_in_an_error(tmp_path):
    for env in (
        {"EMBEDDING_API_KEY": "sk-secret-123"},  # a key and no provider to use it
        {"LLM_API_KEY": "sk-secret-123", "LLM_PROVIDER": "vllm"},  # no model
        {"SILICONFLOW_API_KEY": "sk-secret-123", "LLM_PROVIDER": "custom"},  # no base_url
    ):
        with pytest.raises(ConfigError) as error:
            load_config({"ORCA_HOME": str(tmp_path), **env})
        assert "sk-secret-123" not in str(error.value)


@pytest.mark.slow
def test_the_service_refuses_to_start_on_a_malformed_file(tmp_path):
    write_config(tmp_path, "[orca\n")
    result = run_alone(tmp_path, "manage.py", "check")
    assert result.returncode != 0
    assert f"configuration error: {tmp_path / 'config.toml'}" in result.stderr
    assert "line 1" in result.stderr
    assert "Traceback" not in result.stderr


def test_database_url_selects_postgresql_in_libpq_forms(tmp_path):
    assert load_config({"ORCA_HOME": str(tmp_path)}).database_url is None
    socket = "postgresql://orca:@/orca?host=/run/postgresql"
    assert postgres_settings(socket) == {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "orca",
        "USER": "orca",
        "PASSWORD": "",
        "HOST": "/run/postgresql",
        "PORT": "",
        "OPTIONS": {},
    }
    tcp = postgres_settings("postgres://me:p%40ss@db.example:6543/memory?sslmode=require")
    assert (tcp["USER"], tcp["PASSWORD"], tcp["HOST"], tcp["PORT"]) == (
        "me",
        "p@ss",
        "db.example",
        "6543",
    )
    assert (tcp["NAME"], tcp["OPTIONS"]) == ("memory", {"sslmode": "require"})
    write_config(tmp_path, '[orca]\ndatabase_url = "postgresql://localhost/orca"\n')
    assert load_config({"ORCA_HOME": str(tmp_path)}).database_url == "postgresql://localhost/orca"


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("mysql://u:secret@host/orca", "use a postgres:// or postgresql:// URL"),
        ("postgresql://u:secret@host", "name the database"),
        ("postgresql://u:secret@host:port/orca", "Port could not be cast"),
    ],
)
def test_a_bad_database_url_is_refused_without_showing_it(tmp_path, url, reason):
    with pytest.raises(ConfigError) as error:
        load_config({"ORCA_HOME": str(tmp_path), "ORCA_DATABASE_URL": url})
    assert "ORCA_DATABASE_URL" in str(error.value)
    assert reason in str(error.value)
    assert "secret" not in str(error.value)
    assert "secret" not in repr(load_config({"ORCA_HOME": str(tmp_path)}))


LOCAL_URL = "postgresql://postgres:@/orca?host=/home/me/.orca/postgres"


def test_the_recorded_local_server_is_the_database_unless_a_setting_names_one(tmp_path):
    recorded = record_database_url(tmp_path, LOCAL_URL)

    assert recorded == tmp_path / RECORDED_URL_FILE
    assert recorded.stat().st_mode & 0o777 == 0o600
    config = load_config({"ORCA_HOME": str(tmp_path)})
    assert (config.database_url, config.database_url_recorded) == (LOCAL_URL, True)
    explicit = load_config({"ORCA_HOME": str(tmp_path), "ORCA_DATABASE_URL": "postgresql://db/x"})
    assert (explicit.database_url, explicit.database_url_recorded) == ("postgresql://db/x", False)
    write_config(tmp_path, '[orca]\ndatabase_url = "postgresql://db/y"\n')
    in_file = load_config({"ORCA_HOME": str(tmp_path)})
    assert (in_file.database_url, in_file.database_url_recorded) == ("postgresql://db/y", False)


def test_forgetting_the_recorded_server_returns_the_home_to_sqlite(tmp_path):
    record_database_url(tmp_path, LOCAL_URL)

    assert forget_database_url(tmp_path) is True

    config = load_config({"ORCA_HOME": str(tmp_path)})
    assert (config.database_url, config.database_url_recorded) == (None, False)
    assert forget_database_url(tmp_path) is False  # nothing left to forget


def test_a_recorded_url_that_is_not_one_is_refused_naming_its_file(tmp_path):
    (tmp_path / RECORDED_URL_FILE).write_text("mysql://u:secret@host/orca\n")

    with pytest.raises(ConfigError) as error:
        load_config({"ORCA_HOME": str(tmp_path)})

    assert str(tmp_path / RECORDED_URL_FILE) in str(error.value)
    assert "local_postgres --forget" in str(error.value)
    assert "secret" not in str(error.value)


# --- [llm] and [embedding] ---------------------------------------------------------------


def config_of(tmp_path: Path, **env: str):
    return load_config({"ORCA_HOME": str(tmp_path), **env})


@pytest.mark.parametrize(
    ("provider", "base_url", "model"),
    [
        ("siliconflow", "https://api.siliconflow.cn/v1", "Qwen/Qwen2.5-7B-Instruct"),
        ("openai", "https://api.openai.com/v1", "gpt-4o-mini"),
        ("ollama", "http://127.0.0.1:11434/v1", "qwen2.5:7b"),
        ("vllm", "http://127.0.0.1:8000/v1", "Qwen/Qwen2.5-7B-Instruct"),
        ("llamacpp", "http://127.0.0.1:8080/v1", "local"),
    ],
)
def test_an_llm_preset_fills_the_base_url_and_an_explicit_one_wins(
    tmp_path, provider, base_url, model
):
    env = {"LLM_PROVIDER": provider, "LLM_API_KEY": "sk-1"}
    if provider != "siliconflow":  # the only preset with a default model
        env["LLM_MODEL"] = model
    config = config_of(tmp_path, **env)
    assert (config.llm_provider, config.llm_base_url, config.llm_model) == (
        provider,
        base_url,
        model,
    )
    moved = config_of(tmp_path, **env, LLM_BASE_URL="http://gpu-box:9000/v1")
    assert (moved.llm_provider, moved.llm_base_url) == (provider, "http://gpu-box:9000/v1")


def test_a_base_url_and_a_model_alone_configure_a_chat_model_without_a_key(tmp_path):
    write_config(tmp_path, '[llm]\nbase_url = "http://127.0.0.1:1234/v1"\nmodel = "qwen3-8b"\n')
    config = load_config({"ORCA_HOME": str(tmp_path), "LLM_TIMEOUT_SECONDS": "300"})
    assert (config.llm_provider, config.llm_base_url, config.llm_model) == (
        "custom",
        "http://127.0.0.1:1234/v1",
        "qwen3-8b",
    )
    assert (config.llm_api_key, config.llm_timeout_seconds) == (None, 300)


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        ("", {"LLM_PROVIDER": "ollama"}, "LLM_PROVIDER = 'ollama' needs [llm] model (LLM_MODEL)"),
        (
            '[llm]\nbase_url = "http://127.0.0.1:8000/v1"\n',
            {},
            "[llm] base_url = 'http://127.0.0.1:8000/v1' needs [llm] model (LLM_MODEL)",
        ),
        (
            '[llm]\nprovider = "openai"\nmodel = "gpt-4o-mini"\n',
            {},
            "[llm] provider = 'openai' needs [llm] api_key (LLM_API_KEY)",
        ),
        ("", {"LLM_PROVIDER": "custom"}, "needs [llm] base_url (LLM_BASE_URL) and [llm] model"),
        ('[llm]\nmodel = "m"\nprovider = "gemini"\n', {}, "[llm] provider: invalid value"),
        ("", {"LLM_BASE_URL": "127.0.0.1:8000"}, "LLM_BASE_URL: invalid value '127.0.0.1:8000'"),
        (
            "",
            {"EMBEDDING_PROVIDER": "openai", "EMBEDDING_BASE_URL": "http://127.0.0.1:11434/v1"},
            "EMBEDDING_PROVIDER = 'openai' needs [embedding] model (EMBEDDING_MODEL) and "
            "[embedding] dimension (EMBEDDING_DIMENSION)",
        ),
        (
            '[embedding]\nbase_url = "http://127.0.0.1:11434/v1"\nmodel = "bge-m3"\n',
            {},
            "[embedding] base_url = 'http://127.0.0.1:11434/v1' needs [embedding] dimension",
        ),
        (
            '[embedding]\nprovider = "siliconflow"\n',
            {},
            "[embedding] provider = 'siliconflow' needs [embedding] api_key (EMBEDDING_API_KEY)",
        ),
        (
            "",
            {"EMBEDDING_API_KEY": "sk-1"},
            "EMBEDDING_API_KEY is set but no remote provider is: set [embedding] provider = "
            '"siliconflow"',
        ),
    ],
)
def test_incomplete_llm_and_embedding_settings_name_what_is_missing_and_where(
    tmp_path, text, env, expected
):
    write_config(tmp_path, text)
    with pytest.raises(ConfigError) as error:
        config_of(tmp_path, **env)
    assert expected in str(error.value)


def test_the_embedding_section_configures_any_openai_compatible_endpoint(tmp_path):
    config = config_of(
        tmp_path,
        EMBEDDING_BASE_URL="http://127.0.0.1:11434/v1",
        EMBEDDING_MODEL="nomic-embed-text",
        EMBEDDING_DIMENSION="768",
        EMBEDDING_API_KEY="sk-1",
        EMBEDDING_BATCH_SIZE="16",
    )
    assert config.embedding_provider == "auto"  # memory.embeddings resolves it: openai
    assert (config.embedding_base_url, config.embedding_model, config.embedding_dim) == (
        "http://127.0.0.1:11434/v1",
        "nomic-embed-text",
        768,
    )
    assert (config.embedding_api_key, config.embedding_batch_size) == ("sk-1", 16)
    local = config_of(tmp_path, EMBEDDING_PROVIDER="local", EMBEDDING_MODEL="e5-small")
    assert (local.embedding_provider, local.embedding_model, local.embedding_base_url) == (
        "local",
        "e5-small",
        None,
    )


def test_the_siliconflow_embedding_preset_needs_only_a_key(tmp_path):
    config = config_of(tmp_path, EMBEDDING_PROVIDER="siliconflow", EMBEDDING_API_KEY="sk-1")
    assert (config.embedding_base_url, config.embedding_model, config.embedding_dim) == (
        "https://api.siliconflow.cn/v1",
        "Pro/BAAI/bge-m3",
        1024,
    )
    assert config.llm_provider == "none"  # the chat model is configured apart


def test_a_siliconflow_key_alone_still_gives_its_embeddings_and_chat_model(tmp_path):
    config = config_of(tmp_path, SILICONFLOW_API_KEY="sk-1")

    assert (config.embedding_provider, config.embedding_api_key) == ("siliconflow", "sk-1")
    assert (config.embedding_base_url, config.embedding_model, config.embedding_dim) == (
        "https://api.siliconflow.cn/v1",
        "Pro/BAAI/bge-m3",
        1024,
    )
    assert (config.llm_provider, config.llm_api_key, config.llm_model) == (
        "siliconflow",
        "sk-1",
        "Qwen/Qwen2.5-7B-Instruct",
    )
    # ... unless the new sections choose otherwise.
    ollama = config_of(
        tmp_path,
        SILICONFLOW_API_KEY="sk-1",
        LLM_PROVIDER="ollama",
        LLM_MODEL="qwen2.5:7b",
        EMBEDDING_PROVIDER="local",
    )
    assert (ollama.llm_provider, ollama.llm_api_key, ollama.embedding_provider) == (
        "ollama",
        None,
        "local",
    )
    assert config_of(tmp_path, SILICONFLOW_API_KEY="sk-1", LLM_PROVIDER="none").llm_model is None


OLD_FILE = """
[orca]
embedding_provider = "openai"
embedding_batch_size = 8

[siliconflow]
api_key = "sk-old"
base_url = "https://sf.example/v1"
chat_model = "Qwen/Qwen3-8B"

[openai]
base_url = "http://127.0.0.1:11434/v1"
embedding_model = "nomic-embed-text"
api_key = "ollama"
"""


def test_an_old_config_file_maps_onto_the_new_sections_with_one_notice(tmp_path, caplog):
    write_config(tmp_path, OLD_FILE)

    config = config_of(tmp_path)

    assert (config.embedding_provider, config.embedding_base_url, config.embedding_model) == (
        "openai",
        "http://127.0.0.1:11434/v1",
        "nomic-embed-text",
    )
    # [openai] never asked for a dimension: its tables were made with the old default.
    assert (config.embedding_api_key, config.embedding_dim, config.embedding_batch_size) == (
        "ollama",
        1024,
        8,
    )
    assert (config.llm_provider, config.llm_base_url, config.llm_model, config.llm_api_key) == (
        "siliconflow",
        "https://sf.example/v1",
        "Qwen/Qwen3-8B",
        "sk-old",
    )
    caplog.set_level(logging.WARNING, logger="orca_memory.core.config")
    log_legacy_notice(config)
    (notice,) = caplog.records
    for old, new in [
        ("[orca] embedding_provider", "[embedding] provider"),
        ("[orca] embedding_batch_size", "[embedding] batch_size"),
        ("[siliconflow] api_key", "[embedding] api_key and [llm] api_key"),
        ("[siliconflow] chat_model", "[llm] model"),
        ("[openai] base_url", "[embedding] base_url"),
        ("[openai] embedding_model", "[embedding] model"),
    ]:
        assert f"{old} -> {new}" in notice.getMessage()
    assert "sk-old" not in notice.getMessage()
    assert "old keys in use" in notice.getMessage()


def test_new_keys_win_over_old_ones_in_the_same_place_and_the_environment_over_the_file(
    tmp_path,
):
    write_config(
        tmp_path,
        '[orca]\nembedding_provider = "none"\nembedding_dim = 512\n'
        '[embedding]\nprovider = "local"\n',
    )
    assert config_of(tmp_path).embedding_provider == "local"  # both in the file
    assert config_of(tmp_path).embedding_dim == 512  # only the old key sets it
    # The Makefile's and the tests' ORCA_EMBEDDING_PROVIDER still override the file.
    assert config_of(tmp_path, ORCA_EMBEDDING_PROVIDER="none").embedding_provider == "none"
    both = config_of(tmp_path, ORCA_EMBEDDING_PROVIDER="none", EMBEDDING_PROVIDER="local")
    assert both.embedding_provider == "local"
    assert config_of(tmp_path, ORCA_EMBEDDING_DIM="384").embedding_dim == 384


def test_embedding_provider_none_stays_valid_in_the_old_key(tmp_path):
    write_config(tmp_path, '[orca]\nembedding_provider = "none"\n')
    config = config_of(tmp_path)
    assert (config.embedding_provider, config.embedding_model) == ("none", None)
    assert "[orca] embedding_provider -> [embedding] provider" in config.legacy_notice


@pytest.mark.slow
def test_the_notice_about_old_keys_is_logged_once_as_a_process_starts(tmp_path):
    result = run_alone(
        tmp_path,
        "manage.py",
        "check",
        SILICONFLOW_API_KEY="sk-old-secret",
        ORCA_EMBEDDING_PROVIDER="none",
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("old keys in use") == 1
    assert "SILICONFLOW_API_KEY -> [embedding] api_key and [llm] api_key" in result.stderr
    assert "ORCA_EMBEDDING_PROVIDER -> [embedding] provider" in result.stderr
    assert "sk-old-secret" not in result.stderr


def test_the_readme_lists_every_setting_with_its_variable():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for setting in SETTINGS:
        assert f"`{setting.name}`" in readme, setting.name
        assert f"`{setting.env}`" in readme, setting.env


def test_each_process_computes_on_one_blas_thread():
    """memory's AppConfig.ready limits numpy's BLAS to one thread: a process answers one call
    at a time beside the other workers on the same cores (docs/BENCHMARKS.md)."""
    from threadpoolctl import threadpool_info

    blas = [info for info in threadpool_info() if info["user_api"] == "blas"]
    assert blas and all(info["num_threads"] == 1 for info in blas)
