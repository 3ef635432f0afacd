"""config.toml and environment variables: precedence, defaults and clear errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from orca_memory.config import ConfigError, load_config, postgres_settings

ROOT = Path(__file__).resolve().parent.parent


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
    assert config.embedding_dim == 1024
    assert config.siliconflow_api_key is None
    assert config.siliconflow_embedding_model == "Pro/BAAI/bge-m3"
    assert config.siliconflow_base_url == "https://api.siliconflow.cn/v1"
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
[siliconflow]
api_key = "sk-from-file"
embedding_model = "BAAI/bge-large-zh-v1.5"

[orca]
data_dir = "/srv/orca"
model_window = 32000
""",
    )
    env = {
        "ORCA_HOME": str(tmp_path),
        "SILICONFLOW_API_KEY": "sk-from-env",
        "ORCA_MODEL_WINDOW": "128000",
    }

    config = load_config(env)

    assert config.siliconflow_api_key == "sk-from-env"
    assert config.model_window == 128000
    assert config.siliconflow_embedding_model == "BAAI/bge-large-zh-v1.5"
    assert config.data_dir == Path("/srv/orca")
    assert config.db_path == Path("/srv/orca/orca.db")  # derived from the file's data_dir
    assert load_config({**env, "ORCA_DB_PATH": "~/x.db"}).db_path == Path("~/x.db").expanduser()


def test_an_empty_environment_variable_does_not_override(tmp_path):
    write_config(tmp_path, '[siliconflow]\napi_key = "sk-file"\n')
    config = load_config({"ORCA_HOME": str(tmp_path), "SILICONFLOW_API_KEY": ""})
    assert config.siliconflow_api_key == "sk-file"


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


def test_the_api_key_stays_out_of_repr(tmp_path):
    config = load_config({"ORCA_HOME": str(tmp_path), "SILICONFLOW_API_KEY": "sk-secret-123"})
    assert "sk-secret-123" not in repr(config)
    assert "sk-secret-123" not in str(config)


@pytest.mark.slow
def test_the_service_refuses_to_start_on_a_malformed_file(tmp_path):
    write_config(tmp_path, "[orca\n")
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={"ORCA_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
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
