# The two commands of the README. Each one sets up what it needs first (idempotent):
#   make prove   the main job: canary on the real engine paths inside an outer guard,
#                the pinned mutant without and with isolation, a route table (about 10 s
#                once set up; the set-up installs only what prove needs: `pip install -e .`)
#   make test    the whole test suite (unit, property, T-series; 12-17 minutes on 2 cores),
#                with everything it needs: `pip install -e '.[test]'`
VENV ?= .venv
PY := $(VENV)/bin/python
SYSTEM_PACKAGES := bubblewrap iproute2 socat netcat-openbsd sudo curl git util-linux
# The locks apt-get and dpkg take (apt-pkg/deb/debsystem.cc): another apt holding one makes
# ours wait (DPkg::Lock::Timeout), and we say so instead of failing with "Could not get lock".
DPKG_LOCKS ?= /var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock
APT_LOCK_TIMEOUT ?= 120

.PHONY: setup setup-prove system venv venv-prove prove test lint bench bench-attempts

setup: system venv
setup-prove: system venv-prove

# Installs the system packages when they are missing and we are root; otherwise it
# only says what is missing (the tests then skip with that reason). apt-get's output (and
# debconf's, answered non-interactively) goes to a log of mktemp's (never a fixed name in
# /tmp as root), shown on a failure and removed on success.
system:
	@missing=""; for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    log=$$(mktemp /tmp/no-docker-apt-get.XXXXXX) || exit 1; \
	    echo "make: installing system packages:$$missing (apt-get's output: $$log)"; \
	    holder=$$(python3 -c "$$LOCK_HOLDER" $(DPKG_LOCKS)); \
	    if [ -n "$$holder" ]; then echo "make: waiting for the dpkg lock (held by $$holder; at most $(APT_LOCK_TIMEOUT) s)"; fi; \
	    { apt-get -qq -o DPkg::Lock::Timeout=$(APT_LOCK_TIMEOUT) update \
	      && DEBIAN_FRONTEND=noninteractive apt-get -qq -y -o DPkg::Lock::Timeout=$(APT_LOCK_TIMEOUT) install $$missing; \
	    } > $$log 2>&1 \
	      || { tail -n 20 $$log >&2; echo "make: apt-get failed; its whole output: $$log" >&2; exit 1; }; \
	    rm -f $$log; \
	  else echo "make: missing system packages:$$missing (run: sudo apt-get install -y$$missing)" >&2; fi; \
	fi

# Who holds one of the lock files given as arguments (F_GETLK, fcntl(2): asks, never takes
# the lock), as "pid N (NAME)", or nothing.
define LOCK_HOLDER
import fcntl, os, struct, sys
for path in sys.argv[1:]:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        continue
    ask = struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
    kind, _, _, _, pid = struct.unpack("hhqqi", fcntl.fcntl(fd, fcntl.F_GETLK, ask))
    if kind != fcntl.F_UNLCK:
        try:
            name = open(f"/proc/{pid}/comm").read().strip()
        except OSError:
            name = "?"
        print(f"pid {pid} ({name})")
        break
endef
export LOCK_HOLDER

venv: $(VENV)/.installed
venv-prove: $(VENV)/.installed-prove

# pip's output (progress, build warnings, notices) goes to a log: `make prove` shows one line
# here, then only what `no-docker prove` prints. On a failure the log's tail is shown.
# $(call pip_install,SPEC,WHAT): install no-docker with SPEC into the venv.
define pip_install
	@echo "make: installing no-docker into $(VENV), $(2) (pip's output: $(VENV)/setup.log)"
	@test -x $(PY) || python3 -m venv $(VENV)
	@{ $(PY) -m pip install --upgrade pip && $(PY) -m pip install -e '$(1)'; } > $(VENV)/setup.log 2>&1 \
	  || { tail -n 20 $(VENV)/setup.log >&2; echo "make: pip failed; its whole output: $(VENV)/setup.log" >&2; exit 1; }
endef

# Everything the suite needs (pytest, hypothesis, ruff, matplotlib, mutmut, cosmic-ray, ...).
$(VENV)/.installed: pyproject.toml
	$(call pip_install,.[test],with what the tests need: about 40 s)
	@touch $@ $(VENV)/.installed-prove

# Only what `no-docker prove` needs (the package and its own dependencies). A venv that has
# the test install already has it.
$(VENV)/.installed-prove: pyproject.toml
	$(call pip_install,.,only what prove needs: about 15 s)
	@touch $@

prove: setup-prove
	@$(VENV)/bin/no-docker prove

# pytest prints a line per test file with a dot per test as it goes (-ra: the reasons of
# skips and failures at the end).
test: setup
	$(PY) -m pytest

lint: venv
	$(VENV)/bin/ruff check .

bench: venv
	$(PY) -m tests.bench

# The per-mutant engine-attempt summary on a real project (pytest-docker's sdist, a cosmic-ray
# operator plugin that makes payload-bearing mutants): docs/mutation-testing.md, "On a real project".
bench-attempts: venv
	$(PY) tests/bench/bench_real_attempts.py
