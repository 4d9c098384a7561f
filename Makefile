# Two commands on a fresh machine: `make run` and `make test` (see README.md).
VENV := .venv
BIN := $(VENV)/bin
PYTHON ?= python3

.PHONY: run test lint typecheck pytest bench install dev clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# Reinstall whenever pyproject.toml changes.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

# The client distribution (client/) with every framework adapter, for its tests and examples.
$(VENV)/.installed-dev: pyproject.toml client/pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]' -e './client[all]'
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed
dev: $(VENV)/.installed-dev

# A first `make run` writes .env with a fresh GATEWAY_SECRET_KEY; edit it to add channels.
.env: | $(BIN)/python
	sed "s|^GATEWAY_SECRET_KEY=.*|GATEWAY_SECRET_KEY=$$($(BIN)/python -c 'import secrets; print(secrets.token_urlsafe(32))')|" .env.example > .env
	@echo "wrote .env with a new GATEWAY_SECRET_KEY"

run: install .env
	$(BIN)/gateway serve

lint: dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: dev
	$(BIN)/mypy

# Two workers for most of the suite, then the tests that time things to the second, alone.
pytest: dev
	bash tests/services/provision.sh
	$(BIN)/pytest -n 2 -m "not serial"
	$(BIN)/pytest -m serial

test: lint typecheck pytest

bench: dev
	bash tests/services/provision.sh --bench
	$(BIN)/python bench/intake.py
	$(BIN)/python bench/decision_latency.py --postgres
	$(BIN)/python bench/longpoll_scale.py
	$(BIN)/python bench/full_store.py --postgres
	$(BIN)/python bench/slack_latency.py
	$(BIN)/python bench/discord_latency.py
	$(BIN)/python bench/teams_latency.py
	$(BIN)/python bench/telegram_latency.py
	$(BIN)/python bench/email_latency.py
	$(BIN)/python bench/replicas.py
	$(BIN)/python bench/startup.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
