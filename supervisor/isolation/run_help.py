"""``no-docker run --help``: kept apart from run.py, which imports only what every run needs."""

from __future__ import annotations

HELP = """\
usage: no-docker run [OPTION]... [--] CMD [ARG...]

Run CMD where no container engine can be reached, prove that from inside before CMD starts
(else exit 125 and CMD never runs), and when CMD ends (or no-docker is signalled) end every
process of the run and prove none is left.

Inside the run:
  - the work dir (--work, default: the current directory) and --rw paths are writable; the
    system dirs are read-only; .git/hooks, .git/config and other files that run code later,
    outside, stay read-only;
  - /tmp, /var/tmp, /run, /dev/shm and $HOME are fresh and empty: what CMD writes there is
    thrown away when the run ends (TMPDIR is the run's /tmp);
  - there is no network (loopback only): install what CMD needs before the run;
  - the environment is an allowlist (PATH, HOME, LANG, TERM, ...); --keep-env adds to it.

options:
  --work DIR          the directory CMD may write, and runs in (default: the current
                      directory). Not $HOME, not / or a system dir (usage error, exit 2). In a
                      subdirectory of a git repository, pass the repository's root when CMD
                      needs git or files above it:  --work "$(git rev-parse --show-toplevel)"
  --rw DIR            also writable (repeatable); it must exist: mkdir -p it first.
                      Not /proc, /sys, /dev or /run (the run has its own), not /tmp or
                      another world-writable sticky dir (a dir of your own in it is fine),
                      not a cache whose content runs later (~/.cache/pip, ~/.npm,
                      ~/.cargo...: give it as --ro, or let the run use its own throwaway
                      one), and not where your environment names start-up code or a config
                      (PYTHONUSERBASE, GIT_CONFIG_GLOBAL, BASH_ENV, XDG_CONFIG_HOME...)
  --ro PATH           also visible, read-only (repeatable), e.g. a data set outside the work
                      dir: --ro /data/fixtures
  --keep-env NAME     pass the variable NAME in (repeatable), e.g. --keep-env CI. Variables
                      that route to an engine or run code at shell start-up (DOCKER_*,
                      KUBECONFIG, SSH_AUTH_SOCK, BASH_ENV, LD_PRELOAD...) are refused
  --max-pids N        at most N processes at once (a cgroup limit; 8 to 4194304), e.g.
                      --max-pids 2000 against fork bombs
  --tmp-size SIZE     the most each fresh directory (/tmp, /var/tmp, /run, /dev/shm, $HOME)
                      may hold, e.g. --tmp-size 8G (K, M, G; default: a quarter of the RAM
                      each); past it a write fails with "No space left on device". Needs
                      bubblewrap 0.7 or later (an older one: no bound, or exit 125 if asked)
  --memory-max SIZE   at most SIZE of memory for the whole run, what it writes to its fresh
                      directories included (a cgroup limit, e.g. --memory-max 4G; as root,
                      or where a cgroup is delegated: else exit 125). Past it the kernel
                      kills processes of the run, never no-docker
  --end-timeout S     how long the ending may take to show every process gone (default 10
                      seconds; 0.1 to 3600); past it: exit 125 and the `no-docker end RUN_ID`
                      that finishes the job
  --publish [127.0.0.1:]PORT
                      forward the host's loopback PORT to the same port on the run's own
                      loopback (repeatable), for a server inside that something outside must
                      reach, e.g. --publish 8000. Loopback only; engine ports (2375-2377,
                      4243, 6443, 10250) are refused
  --report FILE       write the run as JSON: proven properties, exit status, timings, the
                      ending, CPU time and peak memory, network attempts, attempts to reach
                      an engine, e.g. --report run.json
  --quiet             no status lines on success (failures, and attempts to reach an engine,
                      are still one line each)
  -h, --help          this help
  --                  ends the options: everything after it is CMD

examples:
  no-docker run -- pytest -q
  no-docker run --ro ~/.cache/pip --max-pids 2000 -- mutmut run
  no-docker run --work "$(git rev-parse --show-toplevel)" -- make check
  no-docker run --report run.json --quiet -- ./tests/run.sh

Status lines go to stderr, one line each; stdout carries only what CMD prints.

exit status:
  CMD's own      (128+N when CMD was killed by signal N)
  125            the isolation is not proven (CMD never ran), the run could not be started,
                 or the ending could not be shown (then: no-docker end RUN_ID)
  126, 127       CMD not executable, not found
  2              usage: a bad option or value (checked before anything starts)

environment:
  NO_DOCKER_STATE_DIR  where run markers live (default $XDG_RUNTIME_DIR/no-docker when that
                       dir is yours and 0700, /run/no-docker as root, else /tmp/no-docker-UID,
                       or the next of /tmp/no-docker-UID.1, .2... when someone else took it)
  NO_DOCKER_BWRAP      the bubblewrap binary (default: /usr/bin/bwrap); what it builds is proven
                       before CMD starts, but it is code you run: never one a run can write

More: docs/isolation.md (what a run may see, and how each property is proven),
docs/supervision.md (how every process is ended)."""
