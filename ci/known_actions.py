"""What the actions on the guard's allowlist do with each of their inputs (rt4 G1-G3, T-76).

An allowlisted action is accepted because it runs none of the repository's code, but that holds
only for the inputs the guard knows: ``actions/setup-python`` v6.1.0 added ``pip-install``, which
runs ``python -m pip install ARGS`` in the workspace (``-m`` imports a ``pip/`` of the repository
first; ``-e .`` runs its build code), and ``actions/setup-go`` v4+ restores a cache when ``cache:``
is not written at all (its action.yml: ``cache: default: true``). So every input of every
allowlisted action is in ``INPUTS``, transcribed from the ``inputs:`` of the action.yml of every
tag of its repository (actions/setup-python v1-v7, setup-node v1-v6, setup-go v1-v6, setup-java
v1-v5 and main, checkout v1-v6, upload-artifact v1-v7, download-artifact v1-v8), as one of

* ``DATA``: a value the action reads as data (a version, a name, a token, a path it hashes);
* ``CODE``: when on, the action runs a program from the workspace or installs a toolchain from a
  place the guard cannot check onto PATH (``pip-install``, setup-node's caches, which run
  ``yarn``/``npm``/``pnpm`` in the workspace, where ``.yarnrc.yml``'s ``yarnPath`` is code; a
  JDK file, a download mirror);
* ``CACHE``: when on, it restores a cache an earlier workflow run saved (``restored-cache``);
* ``FOREIGN``: when given, the checkout brings content the guard did not review (another
  repository, ref, server, submodules, or a place other than the workspace root).

An input that is not in the table is one the guard cannot tell about: the step is refused
(``unisolated-step``), never passed. Where a default differs between major versions it is given
by version (``on_from``: the first major whose default is on); a ref that is not ``vN[.N[.N]]``
(a commit, a branch) may be any version, so the default is taken as on (fail closed).

Pure functions over the step's ``with:`` values; no network, no file system.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DATA, CODE, CACHE, FOREIGN = "data", "code", "cache", "foreign"


@dataclass(frozen=True)
class Input:
    kind: str
    why: str = ""
    on_from: int | None = None  # first major version whose default turns it on; None: off by default


_D = Input(DATA)
_TOKEN = _D
_PM_RUNS = ("runs the package manager in the workspace (`yarn config get cacheFolder`, `npm config get "
            "cache`): yarn runs the repository's .yarnrc.yml yarnPath, and it restores a cache")

INPUTS: dict[str, dict[str, Input]] = {
    "actions/checkout": {
        **{k: _D for k in ("token", "ssh-key", "ssh-known-hosts", "ssh-strict", "ssh-user",
                           "persist-credentials", "clean", "filter", "sparse-checkout",
                           "sparse-checkout-cone-mode", "fetch-depth", "fetch-tags", "show-progress",
                           "lfs", "set-safe-directory", "allow-unsafe-pr-checkout")},
        "repository": Input(FOREIGN, "another repository"),
        "ref": Input(FOREIGN, "another ref than the commit the guard reviews"),
        "path": Input(FOREIGN, "a place other than the workspace root"),
        "github-server-url": Input(FOREIGN, "another server"),
        "submodules": Input(FOREIGN, "submodules, content of other repositories"),
    },
    "actions/setup-python": {
        **{k: _D for k in ("python-version", "python-version-file", "version", "architecture",
                           "check-latest", "token", "cache-dependency-path", "update-environment",
                           "allow-prereleases", "freethreaded", "pip-version")},
        "cache": Input(CACHE),
        "pip-install": Input(CODE, "runs `python -m pip install ARGS` in the workspace (-m imports a pip/ "
                             "of the repository first; `-e .` or a path runs its build code)"),
    },
    "actions/setup-node": {
        **{k: _D for k in ("node-version", "node-version-file", "version", "architecture", "check-latest",
                           "token", "registry-url", "scope", "always-auth", "cache-dependency-path",
                           "mirror-token")},
        "cache": Input(CODE, _PM_RUNS),
        # v5+: on unless written false (src/main.ts: `(getInput(...) || 'true')`)
        "package-manager-cache": Input(CODE, _PM_RUNS + " (on by default since v5)", on_from=5),
        "mirror": Input(CODE, "downloads Node.js from a mirror the guard cannot check, onto PATH"),
    },
    "actions/setup-go": {
        **{k: _D for k in ("go-version", "go-version-file", "version", "check-latest", "stable", "token",
                           "cache-dependency-path", "architecture")},
        "cache": Input(CACHE, on_from=4),  # action.yml: `default: false` up to v3, `true` from v4
        "go-download-base-url": Input(CODE, "downloads Go from a place the guard cannot check, onto PATH"),
    },
    "actions/setup-java": {
        **{k: _D for k in ("java-version", "java-version-file", "version", "distribution", "java-package",
                           "architecture", "check-latest", "force-download", "set-default",
                           "verify-signature", "verify-signature-public-key", "server-id",
                           "server-username", "server-password", "server-username-env-var",
                           "server-password-env-var", "mvn-server-credentials", "mvn-repositories",
                           "mvn-repositories-include-central", "mvn-repositories-prioritize-central",
                           "settings-path", "overwrite-settings", "gpg-private-key", "gpg-passphrase",
                           "gpg-passphrase-env-var", "cache-dependency-path", "cache-path",
                           "cache-read-only", "job-status", "token", "mvn-toolchain-id",
                           "mvn-toolchain-vendor", "show-download-progress", "problem-matcher")},
        "cache": Input(CACHE),
        "cache-jdk": Input(CACHE),  # a restored JDK is put on PATH
        "jdkFile": Input(CODE, "installs a JDK from a file (the repository's?) onto PATH"),
        "jdk-file": Input(CODE, "installs a JDK from a file (the repository's?) onto PATH"),
    },
    "actions/upload-artifact": {
        k: _D for k in ("name", "path", "if-no-files-found", "retention-days", "compression-level",
                        "overwrite", "include-hidden-files", "archive")},
    # path: is checked by workflow_rules (_download_problem); the rest selects what is downloaded
    "actions/download-artifact": {
        k: _D for k in ("name", "path", "artifact-ids", "pattern", "merge-multiple", "github-token",
                        "repository", "run-id", "skip-decompress", "digest-mismatch")},
}

_VERSION = re.compile(r"v?([0-9]+)(\.[0-9]+){0,2}\Z")


def major(ref: str) -> int | None:
    """The major version a ref names (``v5``, ``v6.1.0``), or None (a commit, a branch: any)."""
    m = _VERSION.match(ref)
    return int(m.group(1)) if m else None


def is_on(spec: Input, value: str | None, given: bool, ref: str) -> bool:
    """Whether the input takes effect. Written: on unless empty or ``false`` (an expression may be
    anything: on). Not written: its default for the ref's major version, on when that is not known."""
    if given:
        if value is None or "${{" in value:
            return True
        return value.strip().lower() not in ("", "false")
    if spec.on_from is None:
        return False
    version = major(ref)
    return version is None or version >= spec.on_from


@dataclass(frozen=True)
class Effects:
    """What an allowlisted action does with its inputs: ``problem``, why the guard refuses the
    step (code, or an input it cannot tell about), or None; ``caches``, the inputs that restore a
    cache; ``foreign``, the inputs that bring content the guard did not review (checkout)."""

    problem: str | None = None
    caches: tuple[str, ...] = ()
    foreign: tuple[str, ...] = ()


def effects(name: str, ref: str, inputs: dict[str, str | None] | None) -> Effects:
    """``inputs``: the step's ``with:`` as name -> literal value (None: not a scalar); None when
    ``with:`` is not a mapping. Every input of the table, written or defaulted, is judged."""
    table = INPUTS.get(name)
    if table is None:
        return Effects()
    if inputs is None:
        return Effects("with: is not a list of inputs the guard can read")
    unknown = sorted(k for k in inputs if k not in table)
    if unknown:
        return Effects(f"input {unknown[0]!r} is not one the guard knows (cannot tell whether it "
                       "runs the repository's code or restores a cache); drop it or declare the step")
    problem: str | None = None
    caches: list[str] = []
    foreign: list[str] = []
    for key, spec in table.items():
        if spec.kind == DATA or not is_on(spec, inputs.get(key), key in inputs, ref):
            continue
        shown = f"{key}: {inputs[key]}" if key in inputs else f"{key} (by default at @{ref})"
        if spec.kind == CODE and problem is None:
            problem = f"with {shown}, which {spec.why}"
        if spec.kind in (CACHE, CODE) and (spec.kind == CACHE or "cache" in key):
            caches.append(shown)
        if spec.kind == FOREIGN:
            foreign.append(f"{key} ({spec.why})")
    return Effects(problem, tuple(caches), tuple(foreign))
