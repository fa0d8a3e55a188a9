"""The read-only lint's rules, as data (DESIGN §7).

Everything the lint accepts is listed here; `lint.py` only interprets these tables. A tool
that is not listed is rejected (`command-not-allowed`), so a new tool is a reviewed edit of
this file, never a new branch in the walker. Opaque parts of a value (an environment variable,
a command substitution) are written ``\\0NAME\\0`` in patterns: bash strings cannot hold NUL, so
a pattern can never be matched by a literal that merely looks like ``$HOME``.
"""

from __future__ import annotations

import re

# ---- stable reason codes (tests and docs key on these; never rename one) ---------------------
REASONS: dict[str, str] = {
    "parse-error": "bash cannot parse this (or tree-sitter-bash cannot)",
    "unsupported-syntax": "a construct the lint does not model",
    "unsupported": "outside the bash subset the lint accepts (docs/mutants.md, \"The accepted subset\")",
    "dynamic-command-name": "the command name is not a constant the lint can resolve",
    "command-not-allowed": "a command that is not on the allowlist",
    "destructive-command": "a command that changes files or processes",
    "command-path-not-allowed": "a command run by a path outside the system directories",
    "engine-subcommand-not-allowed": "an engine subcommand that is not on the read-only allowlist",
    "destructive-engine-command": "an engine subcommand that changes state",
    "dynamic-engine-subcommand": "the engine subcommand is not a constant",
    "engine-option-not-allowed": "an engine option that is not on the allowlist",
    "engine-host-not-loopback": "an engine endpoint that is not a unix socket or a loopback address",
    "engine-config-unproven": "an engine config or context the lint cannot read",
    "eval-non-constant": "eval of text that is not a constant",
    "shell-string-non-constant": "bash -c / sh -c of text that is not a constant",
    "shell-reads-stdin": "a shell that reads its program from stdin or a file",
    "shell-option-not-allowed": "a shell option that runs start-up files or changes the shell",
    "source-not-allowed": "source / . runs a file the lint cannot read",
    "trap-not-allowed": "trap runs text later",
    "alias-not-allowed": "aliases change what a name runs",
    "wrapper-option-not-allowed": "an option of env/sudo/timeout/exec/command that hides the command",
    "xargs-open-command": "xargs appends arguments to a command that is not complete and read-only",
    "curl-method-not-read-only": "curl with a method other than GET or HEAD",
    "curl-upload": "curl sends a body or uploads a file",
    "curl-option-not-allowed": "a curl option that is not on the allowlist",
    "curl-url-not-allowed": "a URL that is not a read-only engine endpoint on a local address",
    "python-not-pinned-helper": "python runs something other than a pinned helper",
    "network-input-unprovable": "the bytes sent are not a constant read-only request",
    "socket-address-not-allowed": "a socat/nc address or option that is not a local connect",
    "write-outside-run-dir": "a write outside the run directory",
    "redirect-target-unprovable": "a redirection target the lint cannot resolve",
    "sensitive-variable": "a variable that changes what later commands run",
    "arithmetic-unprovable": "arithmetic over non-constant text can run commands",
    "link-not-allowed": "a symlink other than one to an engine socket in the run directory",
    "mkdir-not-allowed": "a directory outside the run directory and the persistence probes",
}

# ---- directories a command may be named by (a path anywhere else could be any binary) --------
SYSTEM_DIRS = frozenset({"/usr/bin", "/bin", "/usr/local/bin", "/usr/sbin", "/sbin"})

# ---- the accepted subset: builtins -------------------------------------------------------------
# Builtins the subset allows; each has its own argument rule in lint.py (Linter.builtin). Every
# other builtin is refused: in particular all that assign a variable by name (read, unset,
# export, readonly, declare, typeset, mapfile, getopts, printf -v, wait -p, let), because the
# lint's constants are proven only against the assignments it models (NAME=VALUE, local, for).
ALLOWED_BUILTINS = frozenset({
    ":", "true", "false", "echo", "printf", "test", "[", "wait", "return", "exit", "shift", "break",
    "continue", "local", "set", "pwd",
})
# Every bash 5.2 builtin (`enable -a`) and reserved word that can stand in command position:
# a name here that is not allowed above is refused with `unsupported`, however it is reached
# (`command unset x`, `exec read x`, `eval 'export X=1'`).
BASH_BUILTINS = frozenset({
    ".", ":", "[", "alias", "bg", "bind", "break", "builtin", "caller", "cd", "command", "compgen",
    "complete", "compopt", "continue", "declare", "dirs", "disown", "echo", "enable", "eval", "exec",
    "exit", "export", "false", "fc", "fg", "getopts", "hash", "help", "history", "jobs", "kill", "let",
    "local", "logout", "mapfile", "popd", "printf", "pushd", "pwd", "read", "readarray", "readonly",
    "return", "set", "shift", "shopt", "source", "suspend", "test", "times", "trap", "true", "type",
    "typeset", "ulimit", "umask", "unalias", "unset", "wait", "coproc", "select", "function",
})
# `set` may only toggle these; `set -k` (assignments anywhere in argv become environment),
# `set --` (positional parameters), `set -o posix`... are refused.
SET_FLAGS = frozenset({"-e", "+e", "-u", "+u", "-x", "+x"})
SET_OPTIONS = frozenset({"pipefail", "errexit", "nounset", "xtrace"})
# printf: the format must be a constant with only these directives and escapes; any other
# (%d evaluates numbers, %b and %q decode or re-quote, \u/\x/\NNN escapes) is refused, so the
# bytes printf writes are exactly what the lint computed.
PRINTF_DIRECTIVES = frozenset({"%s", "%%"})
PRINTF_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "'": "'"}
# dash's printf keeps the backslash of \" and \' (its conv_escape knows only \\ \a \b \f \n \r
# \t \v and \0NNN): in `sh -c` text only these.
DASH_PRINTF_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\"}

# ---- the accepted subset: external tools and their arguments -------------------------------------
# tool -> flags, value options, and what positional arguments may be: "data" (anything, as long
# as it cannot be read as an option), "none", or "format" (date: one +FORMAT). Options not listed
# are refused: `sort -o FILE` writes, `sort --compress-program` runs a program, `date -s` sets the
# clock.
EXTERNAL_TOOLS: dict[str, dict[str, object]] = {
    "sleep": {"flags": set(), "values": set(), "positional": "data"},
    "id": {"flags": {"-u", "-g", "-n", "-G", "-r"}, "values": set(), "positional": "none"},
    "whoami": {"flags": set(), "values": set(), "positional": "none"},
    "uname": {"flags": {"-a", "-s", "-r", "-m", "-n", "-v", "-o"}, "values": set(), "positional": "none"},
    "date": {"flags": {"-u", "--utc", "-R", "-I"}, "values": set(), "positional": "format"},
    "head": {"flags": {"-q", "-v"}, "values": {"-n", "-c", "--lines", "--bytes"}, "positional": "data"},
    "tail": {"flags": {"-q", "-v"}, "values": {"-n", "-c", "--lines", "--bytes"}, "positional": "data"},
    "tr": {"flags": {"-d", "-s", "-c", "-C"}, "values": set(), "positional": "data"},
    "cut": {"flags": {"-s"}, "values": {"-d", "-f", "-c", "-b"}, "positional": "data"},
    "wc": {"flags": {"-l", "-c", "-w", "-m"}, "values": set(), "positional": "data"},
    "cat": {"flags": {"-v", "-A", "-n", "-e", "-t"}, "values": set(), "positional": "data"},
    "grep": {"flags": {"-q", "-v", "-i", "-E", "-F", "-c", "-n", "-o", "-x", "-w", "-s", "-h"},
             "values": {"-e", "-m"}, "positional": "data"},
    "sort": {"flags": {"-u", "-n", "-r"}, "values": set(), "positional": "data"},
    "basename": {"flags": set(), "values": set(), "positional": "data"},
    "dirname": {"flags": set(), "values": set(), "positional": "data"},
    "sha256sum": {"flags": set(), "values": set(), "positional": "data"},
    "ls": {"flags": {"-l", "-a", "-d", "-1", "-n"}, "values": set(), "positional": "data"},
    "stat": {"flags": {"-L"}, "values": {"-c", "--format"}, "positional": "data"},
}
# Names plain assignments may not take even in lower case: curl and the engine clients read
# these from the environment, and an assignment to a name the caller exported changes it.
LOWERCASE_ENVIRONMENT = frozenset({"http_proxy", "https_proxy", "ftp_proxy", "all_proxy",
                                   "no_proxy", "socks_proxy", "auto_proxy"})
# The only variables a command-prefix assignment (`NAME=VALUE cmd`, `env NAME=VALUE cmd`) may
# set, each checked for what it does: an endpoint, a config dir, a context, a startup file.
PREFIX_VARIABLES = frozenset({"DOCKER_HOST", "CONTAINER_HOST", "DOCKER_CONFIG", "DOCKER_CONTEXT",
                              "BASH_ENV"})

# Known-destructive tools: rejected with `destructive-command` (the rest: `command-not-allowed`).
DESTRUCTIVE_TOOLS = frozenset({
    "rm", "rmdir", "mv", "cp", "dd", "shred", "truncate", "chmod", "chown", "chgrp", "kill",
    "pkill", "killall", "tee", "install", "reboot", "shutdown", "halt", "poweroff", "systemctl",
    "mkfs", "wipefs", "fallocate", "unlink", "crontab", "git", "sed", "awk", "find", "perl",
    "ruby", "node", "patch", "rsync", "scp", "ssh", "nsenter", "chroot", "unshare", "mount",
    "umount", "ip", "iptables", "at", "batch", "curl-config", "wget", "base64", "xxd", "openssl",
    "doas", "pkexec", "su", "runuser", "busybox", "docker-compose",
})
REJECTED_BUILTINS = {
    "eval": "eval-non-constant",  # only when not constant; constant eval is followed
    "source": "source-not-allowed", ".": "source-not-allowed",
    "trap": "trap-not-allowed", "alias": "alias-not-allowed", "unalias": "alias-not-allowed",
    "declare": "sensitive-variable", "typeset": "sensitive-variable", "let": "arithmetic-unprovable",
    "cd": "command-not-allowed", "pushd": "command-not-allowed", "popd": "command-not-allowed",
    "hash": "command-not-allowed", "enable": "command-not-allowed", "builtin": "command-not-allowed",
    "shopt": "command-not-allowed", "coproc": "command-not-allowed", "bind": "command-not-allowed",
    "complete": "command-not-allowed", "mapfile": "command-not-allowed", "readarray": "command-not-allowed",
    "ulimit": "command-not-allowed", "umask": "command-not-allowed", "fc": "command-not-allowed",
}

# ---- wrappers: options (with or without a value); the rest of argv is a command ----------------
WRAPPERS: dict[str, dict[str, object]] = {
    "timeout": {"flags": {"--preserve-status", "--foreground", "-v", "--verbose"},
                "values": {"-k", "--kill-after", "-s", "--signal"}, "positional_before": 1},
    "env": {"flags": {"-i", "--ignore-environment", "-0", "--null"}, "values": {"-u", "--unset"},
            "assignments": True},
    "sudo": {"flags": {"-n", "--non-interactive", "-E", "--preserve-env", "-H", "--set-home", "-b",
                       "--background", "-k", "--reset-timestamp"},
             "values": {"-u", "--user", "-g", "--group"}},
    "nohup": {"flags": set(), "values": set()},
    "setsid": {"flags": {"-w", "--wait", "-f", "--fork"}, "values": set()},
    "nice": {"flags": set(), "values": {"-n", "--adjustment"}},
    "exec": {"flags": {"-c", "-l"}, "values": {"-a"}, "empty_ok": True},
    "command": {"flags": {"-p"}, "values": set(), "query": {"-v", "-V"}},
}

# ---- xargs: options it may take; what follows must be complete and read-only -------------------
XARGS = {"flags": {"-0", "--null", "-r", "--no-run-if-empty", "-t", "--verbose", "-x", "--exit"},
         "values": {"-n", "--max-args", "-L", "--max-lines", "-d", "--delimiter", "-P", "--max-procs",
                    "-s", "--max-chars"}}  # not -a/--arg-file: arguments from a file

# ---- shells: bash -c STRING is parsed and linted; a shell reading a file or stdin is not -------
SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh"})
SHELL_FLAGS = frozenset({"-e", "-u", "-x", "-f", "--norc", "--noprofile", "-p", "+e", "+u", "+x"})
SHELL_VALUE_FLAGS = frozenset({"-o", "+o"})
# The shells whose -c text is linted, and as which dialect: /bin/sh is dash on Debian/Ubuntu,
# whose echo decodes escapes (issue 27 #5). zsh and ksh read the subset differently (zsh's echo
# decodes, its unquoted $x does not split): refused.
SHELL_DIALECTS = {"bash": "bash", "sh": "dash", "dash": "dash"}

# ---- container engines: global options, then a subcommand path on the allowlist ----------------
ENGINES: dict[str, dict[str, object]] = {
    "docker": {
        "values": {"-H", "--host", "-c", "--context", "--config", "-l", "--log-level", "--tlscacert",
                   "--tlscert", "--tlskey"},
        "flags": {"-D", "--debug", "--tls", "--tlsverify"},
        "host_options": {"-H", "--host"},
        "context_options": {"-c", "--context"},
        "config_options": {"--config"},
        "groups": {"system", "context", "container", "image", "volume", "network", "compose",
                   "builder", "buildx", "plugin", "swarm", "node", "service", "stack", "secret",
                   "config", "trust", "manifest", "scout", "checkpoint"},
        "read_only": {("ps",), ("images",), ("version",), ("info",), ("inspect",), ("system", "df"),
                      ("system", "info"), ("context", "ls"), ("context", "list"), ("context", "inspect"),
                      ("context", "show"), ("container", "ls"), ("container", "list"), ("container", "ps"),
                      ("container", "inspect"), ("image", "ls"), ("image", "list"), ("image", "inspect"),
                      ("volume", "ls"), ("network", "ls"), ("compose", "version"), ("compose", "ls"),
                      ("compose", "ps")},
        "destructive": {"rm", "rmi", "prune", "kill", "stop", "run", "create", "exec", "build", "push",
                        "pull", "start", "restart", "pause", "unpause", "update", "commit", "cp", "load",
                        "import", "tag", "login", "logout", "down", "up", "attach", "rename", "use",
                        "remove", "reset", "save", "export", "deploy", "scale", "leave", "init", "install",
                        "enable", "disable", "apply", "delete", "wait", "restore"},
    },
    "podman": {
        "values": {"--url", "--log-level"},  # not --connection/--identity: a remote host
        "flags": {"--remote", "-r", "--debug"},
        "host_options": {"--url"},
        "context_options": set(),
        "config_options": set(),
        "groups": {"system", "container", "image", "volume", "network", "pod", "machine", "compose",
                   "kube", "secret", "manifest", "generate", "play"},
        "read_only": {("ps",), ("images",), ("version",), ("info",), ("inspect",), ("system", "df"),
                      ("system", "info"), ("container", "ls"), ("container", "list"), ("container", "ps"),
                      ("container", "inspect"), ("image", "ls"), ("image", "list"), ("image", "inspect"),
                      ("pod", "ps"), ("pod", "ls"), ("volume", "ls"), ("network", "ls")},
        "destructive": {"rm", "rmi", "prune", "kill", "stop", "run", "create", "exec", "build", "push",
                        "pull", "start", "restart", "pause", "unpause", "reset", "commit", "cp", "load",
                        "import", "tag", "down", "up", "play", "migrate", "renumber", "remove", "export",
                        "save", "attach", "wait"},
    },
    "nerdctl": {
        "values": {"-a", "--address", "-n", "--namespace", "-H", "--host"},
        "flags": {"--debug"},
        "host_options": {"-a", "--address", "-H", "--host"},
        "context_options": set(),
        "config_options": set(),
        "groups": {"system", "container", "image", "volume", "network", "compose", "namespace",
                   "builder"},
        "read_only": {("ps",), ("images",), ("version",), ("info",), ("inspect",), ("container", "ls"),
                      ("container", "inspect"), ("image", "ls"), ("image", "inspect"),
                      ("namespace", "ls"), ("volume", "ls"), ("network", "ls")},
        "destructive": {"rm", "rmi", "prune", "kill", "stop", "run", "create", "exec", "build", "push",
                        "pull", "start", "restart", "pause", "commit", "cp", "load", "import", "tag",
                        "down", "up", "remove", "save", "attach"},
    },
    "ctr": {
        "values": {"-a", "--address", "-n", "--namespace", "--timeout", "--connect-timeout"},
        "flags": {"--debug"},
        "host_options": {"-a", "--address"},
        "context_options": set(),
        "config_options": set(),
        "groups": {"containers", "c", "container", "images", "image", "i", "tasks", "t", "task",
                   "namespaces", "ns", "namespace", "snapshots", "snapshot", "content", "leases",
                   "plugins", "plugin", "events", "install", "shim", "sandboxes", "sandbox"},
        "read_only": {("version",), ("containers", "ls"), ("containers", "list"), ("c", "ls"),
                      ("images", "ls"), ("images", "list"), ("images", "check"), ("i", "ls"),
                      ("tasks", "ls"), ("tasks", "list"), ("t", "ls"), ("namespaces", "ls"),
                      ("ns", "ls"), ("plugins", "ls")},
        "destructive": {"rm", "remove", "delete", "del", "kill", "run", "create", "pull", "push",
                        "import", "export", "tag", "start", "exec", "pause", "mount", "unmount",
                        "prune", "label", "commit", "convert"},
    },
    "crictl": {
        "values": {"-r", "--runtime-endpoint", "-i", "--image-endpoint", "-t", "--timeout"},
        "flags": {"-D", "--debug"},
        "host_options": {"-r", "--runtime-endpoint", "-i", "--image-endpoint"},
        "context_options": set(),
        "config_options": set(),
        "groups": set(),
        "read_only": {("version",), ("ps",), ("images",), ("img",), ("pods",), ("info",), ("inspect",),
                      ("inspecti",), ("inspectp",), ("stats",), ("statsp",), ("imagefsinfo",)},
        "destructive": {"rm", "rmi", "rmp", "stop", "stopp", "runp", "run", "create", "exec", "pull",
                        "start", "update", "attach", "port-forward", "checkpoint", "config"},
    },
    "kubectl": {
        # not --kubeconfig: a kubeconfig's users[].user.exec runs a command on every request
        "values": {"-s", "--server", "--context", "-n", "--namespace", "--request-timeout", "--cluster",
                   "--user"},
        "flags": {"--insecure-skip-tls-verify"},
        "host_options": {"-s", "--server"},
        "context_options": set(),
        "config_options": set(),
        "groups": {"config", "auth", "rollout", "certificate", "plugin", "alpha"},
        "read_only": {("get",), ("version",), ("describe",), ("cluster-info",), ("api-resources",),
                      ("api-versions",), ("config", "view"), ("config", "get-contexts"),
                      ("auth", "can-i")},
        "destructive": {"delete", "apply", "create", "replace", "patch", "exec", "run", "scale", "drain",
                        "cordon", "uncordon", "edit", "label", "annotate", "taint", "set", "expose",
                        "autoscale", "cp", "attach", "port-forward", "proxy", "debug", "restart", "undo",
                        "use-context", "set-context", "kustomize", "wait"},
    },
    "buildctl": {
        "values": {"--addr"},
        "flags": {"--debug"},
        "host_options": {"--addr"},
        "context_options": set(),
        "config_options": set(),
        "groups": {"debug"},
        "read_only": {("du",), ("debug", "workers"), ("debug", "info")},
        "destructive": {"build", "prune"},
    },
}

# ---- every argument after an engine subcommand --------------------------------------------------
# (flags, value options, positional) per read-only subcommand path; positional is "none" or
# "names" (constant words that cannot be read as options). An argument not listed is refused:
# read-only subcommands have options that are not (kubectl --kubeconfig runs a kubeconfig's
# exec plugin). kubectl also takes its global options after the subcommand; the other CLIs
# only before it.
_LIST = ({"-a", "--all", "-l", "--latest", "--no-trunc", "-q", "--quiet", "-s", "--size"},
         {"-f", "--filter", "--format", "-n", "--last"}, "none")
_IMAGES = ({"-a", "--all", "--digests", "--no-trunc", "-q", "--quiet"}, {"-f", "--filter", "--format"},
           "names")
_FORMAT = (set(), {"-f", "--format"}, "none")
_INSPECT = ({"-s", "--size"}, {"-f", "--format", "--type"}, "names")
_QUIET_LIST = ({"-q", "--quiet"}, {"-f", "--filter", "--format"}, "none")
_NOTHING: tuple[set[str], set[str], str] = (set(), set(), "none")
ENGINE_ARGUMENTS: dict[str, dict[tuple[str, ...], tuple[set[str], set[str], str]]] = {
    "docker": {
        ("ps",): _LIST, ("container", "ls"): _LIST, ("container", "list"): _LIST, ("container", "ps"): _LIST,
        ("images",): _IMAGES, ("image", "ls"): _IMAGES, ("image", "list"): _IMAGES,
        ("version",): _FORMAT, ("info",): _FORMAT, ("system", "info"): _FORMAT,
        ("system", "df"): ({"-v", "--verbose"}, {"--format"}, "none"),
        ("inspect",): _INSPECT, ("container", "inspect"): _INSPECT, ("image", "inspect"): _INSPECT,
        ("context", "ls"): ({"-q", "--quiet"}, {"--format"}, "none"),
        ("context", "list"): ({"-q", "--quiet"}, {"--format"}, "none"),
        ("context", "inspect"): (set(), {"-f", "--format"}, "names"), ("context", "show"): _NOTHING,
        ("volume", "ls"): _QUIET_LIST, ("network", "ls"): _QUIET_LIST,
    },
    "podman": {
        ("ps",): _LIST, ("container", "ls"): _LIST, ("container", "list"): _LIST, ("container", "ps"): _LIST,
        ("images",): _IMAGES, ("image", "ls"): _IMAGES, ("image", "list"): _IMAGES,
        ("version",): _FORMAT, ("info",): _FORMAT, ("system", "info"): _FORMAT,
        ("system", "df"): ({"-v", "--verbose"}, {"--format"}, "none"),
        ("inspect",): _INSPECT, ("container", "inspect"): _INSPECT, ("image", "inspect"): _INSPECT,
        ("pod", "ps"): _QUIET_LIST, ("pod", "ls"): _QUIET_LIST, ("volume", "ls"): _QUIET_LIST,
        ("network", "ls"): _QUIET_LIST,
    },
    "nerdctl": {
        ("ps",): _LIST, ("container", "ls"): _LIST, ("images",): _IMAGES, ("image", "ls"): _IMAGES,
        ("version",): _FORMAT, ("info",): _FORMAT, ("inspect",): _INSPECT, ("container", "inspect"): _INSPECT,
        ("image", "inspect"): _INSPECT, ("namespace", "ls"): _QUIET_LIST, ("volume", "ls"): _QUIET_LIST,
        ("network", "ls"): _QUIET_LIST,
    },
    "ctr": {path: ({"-q", "--quiet"}, set(), "none") for path in (
        ("version",), ("containers", "ls"), ("containers", "list"), ("c", "ls"), ("images", "ls"),
        ("images", "list"), ("images", "check"), ("i", "ls"), ("tasks", "ls"), ("tasks", "list"),
        ("t", "ls"), ("namespaces", "ls"), ("ns", "ls"), ("plugins", "ls"))},
    "crictl": {
        ("version",): _NOTHING, ("info",): (set(), {"-o", "--output"}, "none"),
        ("ps",): ({"-a", "--all", "-q", "--quiet"}, {"-o", "--output", "--name", "--state"}, "none"),
        ("images",): ({"-q", "--quiet"}, {"-o", "--output"}, "none"),
        ("img",): ({"-q", "--quiet"}, {"-o", "--output"}, "none"),
        ("pods",): ({"-q", "--quiet"}, {"-o", "--output", "--name", "--state"}, "none"),
        ("inspect",): (set(), {"-o", "--output"}, "names"),
        ("inspecti",): (set(), {"-o", "--output"}, "names"),
        ("inspectp",): (set(), {"-o", "--output"}, "names"), ("stats",): _NOTHING, ("statsp",): _NOTHING,
        ("imagefsinfo",): _NOTHING,
    },
    "kubectl": {
        ("get",): ({"-A", "--all-namespaces"}, {"-o", "--output", "-l", "--selector"}, "names"),
        ("describe",): ({"-A", "--all-namespaces"}, {"-l", "--selector"}, "names"),
        ("version",): ({"--client"}, {"-o", "--output"}, "none"),
        ("cluster-info",): _NOTHING, ("api-resources",): (set(), {"-o", "--output"}, "none"),
        ("api-versions",): _NOTHING, ("config", "get-contexts"): (set(), {"-o", "--output"}, "none"),
        ("auth", "can-i"): (set(), set(), "names"),
    },
    "buildctl": {("du",): ({"-v", "--verbose"}, set(), "none"), ("debug", "workers"): _NOTHING,
                 ("debug", "info"): _NOTHING},
}
# kubectl: values of -o/--output that only format (never jsonpath-file, go-template-file...).
KUBECTL_OUTPUTS = frozenset({"json", "yaml", "wide", "name"})
# docker config dirs the payload writes: only these files, with only these keys (a config.json
# `credsStore`, `proxies`, `cliPluginsExtraDirs` or `features` would run or reroute things).
DOCKER_CONFIG_KEYS = frozenset({"currentContext"})
DOCKER_CONTEXT_META = re.compile(r"contexts/meta/[0-9a-f]{64}/meta\.json")

# Engine endpoint forms (-H, DOCKER_HOST, CONTAINER_HOST, --server...): a unix socket, or a
# loopback address; traffic never leaves the machine.
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})
ENDPOINT_SCHEMES = {"unix": "any", "tcp": "loopback", "ssh": "loopback", "http": "loopback",
                    "https": "loopback"}

# ---- curl ---------------------------------------------------------------------------------------
CURL = {
    "flags": {"-s", "--silent", "-S", "--show-error", "-f", "--fail", "--fail-with-body", "-I", "--head",
              "-k", "--insecure", "-v", "--verbose", "--http1.0", "--http1.1", "--http2",
              "--http2-prior-knowledge", "-g", "--globoff", "-N", "--no-buffer", "-4", "-6",
              "--ipv4", "--ipv6", "-q", "--disable"},
    "values": {"-o", "--output", "-w", "--write-out", "-m", "--max-time", "--connect-timeout",
               "--unix-socket", "--abstract-unix-socket", "-H", "--header", "-X", "--request",
               "-A", "--user-agent", "--url"},
    "upload": {"-d", "--data", "--data-raw", "--data-binary", "--data-ascii", "--data-urlencode",
               "-F", "--form", "--form-string", "-T", "--upload-file", "--json", "-G", "--get",
               "-Q", "--quote", "--post301", "--post302", "--post303"},
    "methods": {"GET", "HEAD"},
    "headers": {"x-no-docker-route", "host", "user-agent", "accept", "connection"},
    "hosts": {"d", "localhost", "127.0.0.1", "[::1]"},
    "socket_hosts": {"d"},  # only meaningful with --unix-socket (never resolved by DNS)
    # Values curl reads from a file when they start with `@` (curl(1): --write-out "@filename",
    # --header "@filename" since 7.55.0, --url "@file" since 8.13.0); -d/-T are uploads, refused.
    "from_file": {"-w", "--write-out", "-H", "--header", "--url"},
}
# Read-only engine API paths (after an optional /vN.N[.N] prefix).
READ_ONLY_PATHS = frozenset({"/_ping", "/version", "/info", "/containers/json", "/images/json",
                             "/libpod/_ping", "/libpod/version", "/libpod/info",
                             "/libpod/containers/json", "/libpod/images/json"})
API_VERSION_PREFIX = re.compile(r"^/v\d+(\.\d+){1,2}(?=/)")

# A constant request written to a socket (socat, nc, bash /dev/tcp): one GET/HEAD, no body.
REQUEST_HEADERS = frozenset({"host", "x-no-docker-route", "user-agent", "accept", "connection"})

# ---- socat / nc ---------------------------------------------------------------------------------
SOCAT = {"flags": {"-d", "-u", "-v", "-x"}, "values": {"-t", "-T"},
         "stdio": {"-", "STDIO", "STDIN", "STDOUT"},
         "connect": {"UNIX-CONNECT": "unix", "UNIX-CLIENT": "unix", "ABSTRACT-CONNECT": "abstract",
                     "TCP": "tcp", "TCP4": "tcp", "TCP6": "tcp", "TCP-CONNECT": "tcp"}}
NC = {"flags": {"-U", "-N", "-v", "-z", "-4", "-6", "-n"}, "values": {"-w", "-q"}}

# ---- python: only a pinned helper, fed as a quoted here-document, with -I ----------------------
PYTHONS = frozenset({"python3", "python", "python3.11", "python3.12", "python3.13"})
PYTHON_FLAGS = frozenset({"-I", "-S", "-u", "-B"})
# A pinned helper is known by the first line of its (pinned, so reviewed) text; what it does
# depends on its arguments too, so each has an argument rule (issue 27 #6: rawsock pasted a
# `--route` holding CR LF into its request line). A pinned helper not listed here takes none.
HELPER_KINDS = {'"""no-docker raw-socket route helper:': "rawsock",
                '"""no-docker docker-py route helper:': "dockerpy_route"}
# A route id: what goes into a request line, a header, a label filter and a TLS SNI. The same
# pattern is in mutants/helpers/rawsock.py (ROUTE_ID), which checks it by itself.
ROUTE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
RAWSOCK = {"endpoints": frozenset({"--unix", "--abstract", "--tcp", "--url"}),
           "protos": frozenset({"http", "libpod", "h2", "tls"}),
           "timeout": re.compile(r"[0-9]{1,3}(\.[0-9]{1,3})?")}

# ---- variables that change what later commands run -----------------------------------------------
SENSITIVE_VARIABLES = frozenset({
    "PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "ENV", "PROMPT_COMMAND", "PS0", "PS1",
    "PS2", "PS4", "IFS", "SHELLOPTS", "BASHOPTS", "GLOBIGNORE", "CDPATH", "PYTHONPATH",
    "PYTHONSTARTUP", "PYTHONHOME", "PYTHONINSPECT", "PERL5OPT", "NODE_OPTIONS", "GIT_DIR",
    "GIT_CONFIG", "GIT_EXEC_PATH", "GIT_SSH", "GIT_SSH_COMMAND", "HOME", "ZDOTDIR", "XDG_CONFIG_HOME",
    "DOCKER_CERT_PATH", "KUBECONFIG", "SUDO_ASKPASS", "EDITOR", "VISUAL", "PAGER", "BROWSER",
    "HISTFILE", "INPUTRC", "TMOUT", "MAIL", "MAILPATH",
})
SENSITIVE_PREFIXES = ("BASH_FUNC_", "LD_", "GIT_")
ENDPOINT_VARIABLES = frozenset({"DOCKER_HOST", "CONTAINER_HOST", "CONTAINERD_ADDRESS", "BUILDKIT_HOST"})
CONTEXT_VARIABLES = frozenset({"DOCKER_CONTEXT", "CONTAINER_CONNECTION"})
CONFIG_VARIABLES = frozenset({"DOCKER_CONFIG"})
STARTUP_FILE_VARIABLES = frozenset({"BASH_ENV"})

# ---- where writes may go -------------------------------------------------------------------------
# Files the payload makes in the run directory carry this prefix: a write can then never replace
# a file of the repository the mutant runs in (Makefile, conftest.py, .envrc...).
RUN_DIR_PREFIX = "no-docker-"
HARMLESS_WRITE_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/fd/1", "/dev/fd/2"})
# The route log: ${NO_DOCKER_ROUTE_LOG:-DEFAULT} with a run-directory default.
ROUTE_LOG_VARIABLE = "NO_DOCKER_ROUTE_LOG"
# Persistence probes: `: >> TARGET` (zero bytes, so no content can change) only into these.
# An empty file can still matter (/etc/nologin, .git/index.lock), hence a closed list.
PERSISTENCE_FILES = (
    "\0HOME\0/.bashrc", "\0HOME\0/.bash_profile", "\0HOME\0/.bash_login", "\0HOME\0/.profile",
    "\0HOME\0/.zshenv", "\0HOME\0/.zshrc", "\0HOME\0/.config/autostart/no-docker-route.desktop",
    "\0HOME\0/.config/systemd/user/no-docker-route.service", ".git/hooks/pre-commit", ".git/config",
    "/var/spool/cron/crontabs/\0$(id -un)\0",
    # What the next `python -m pytest` / pytest outside reads from the work dir (issue 25).
    "pytest.py", "pytest.ini",
)
PERSISTENCE_DIRS = (".git", ".git/hooks", "\0HOME\0/.config/autostart", "\0HOME\0/.config/systemd/user")
PROBE_COMMANDS = frozenset({":", "true"})

# ---- symlinks: only a link in the run directory to an engine socket ----------------------------
ENGINE_SOCKETS = frozenset({
    "/run/docker.sock", "/var/run/docker.sock", "/run/podman/podman.sock",
    "/run/containerd/containerd.sock", "/run/buildkit/buildkitd.sock", "/run/crio/crio.sock",
})
