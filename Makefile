# The two commands of the README. Each one sets up what it needs first (idempotent):
#   make prove   the main job: canary on the real engine paths inside an outer guard,
#                the pinned mutant without and with isolation, a route table
#   make test    the whole test suite (unit, property, T-series)
VENV ?= .venv
PY := $(VENV)/bin/python
SYSTEM_PACKAGES := bubblewrap iproute2 socat netcat-openbsd sudo curl git util-linux

.PHONY: setup system venv prove test lint bench

setup: system venv

# Installs the system packages when they are missing and we are root; otherwise it
# only says what is missing (the tests then skip with that reason).
system:
	@missing=""; for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "make: missing system packages:$$missing (run: sudo apt-get install -y$$missing)" >&2; fi; \
	fi

venv: $(VENV)/.installed

# pip's output (progress, build warnings, notices) goes to a log: `make prove` shows one line
# here, then only what `no-docker prove` prints. On a failure the log's tail is shown.
$(VENV)/.installed: pyproject.toml
	@echo "make: installing no-docker into $(VENV) (pip's output: $(VENV)/setup.log)"
	@test -x $(PY) || python3 -m venv $(VENV)
	@{ $(PY) -m pip install --upgrade pip && $(PY) -m pip install -e '.[test]'; } > $(VENV)/setup.log 2>&1 \
	  || { tail -n 20 $(VENV)/setup.log >&2; echo "make: pip failed; its whole output: $(VENV)/setup.log" >&2; exit 1; }
	@touch $@

prove: setup
	@$(VENV)/bin/no-docker prove

test: setup
	$(PY) -m pytest

lint: venv
	$(VENV)/bin/ruff check .

bench: venv
	$(PY) -m tests.bench
