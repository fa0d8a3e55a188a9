"""Re-make the T-03/T-04/T-05 weakening patches against the current tree.

A patch stops applying when the code it weakens changes. Each weakening here is a recipe
(find this, replace it by that) rather than a fixed diff, so that after a change it can be
re-made and re-checked:

    .venv/bin/python tests/regression/weakened/make_tseries_patches.py
    .venv/bin/python -m pytest tests/regression/test_weakened.py

A recipe that no longer finds its text stops with the file and the text: then the weakening
itself needs rethinking, not just re-making.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
WEAKENED = REPO / "tests" / "regression" / "weakened"
T3 = "tests/regression/test_t03_mutant_under_run_reaches_nothing.py"
T4 = "tests/regression/test_t04_engine_paths_refuse_inside.py"
T4_PATH = f"{T4}::test_engine_path_refuses_inside_the_run"
T5_ROUTE = ("tests/regression/test_t05_mutant_without_isolation_reaches_canary.py"
            "::test_network_route_reaches_canary_without_isolation")
PROVE = "tests/regression/test_prove_end_to_end.py::test_prove_proves_on_this_machine"
PAYLOAD = "mutants/payloads/reach-engine.sh"

Edit = Callable[[str, str], str]


def replace(old: str, new: str) -> Edit:
    def edit(text: str, path: str) -> str:
        if old not in text:
            sys.exit(f"{path}: cannot find {old!r}")
        return text.replace(old, new, 1)

    return edit


def regex(pattern: str, template: str) -> Edit:
    def edit(text: str, path: str) -> str:
        match = re.search(pattern, text, re.M)
        if not match:
            sys.exit(f"{path}: cannot find /{pattern}/")
        return text[:match.start()] + match.expand(template) + text[match.end():]

    return edit


def early_return(method: str) -> Edit:
    """``def METHOD(self) -> None:`` returns at once: the check it makes is skipped."""
    return regex(rf"^(    def {method}\(self\) -> None:\n)", r"\1        return\n")


def both(first: Edit, second: Edit) -> Edit:
    return lambda text, path: second(first(text, path), path)


def make(name: str, breaks: list[str], why: str, edits: dict[str, Edit]) -> None:
    parts = [f"# breaks: {line}\n" for line in breaks] + [f"# why: {why}\n"]
    for rel, edit in edits.items():
        new = edit((REPO / rel).read_text(), rel)
        with tempfile.NamedTemporaryFile("w", suffix=".weakened") as tmp:
            tmp.write(new)
            tmp.flush()
            diff = subprocess.run(["diff", "-u", "--label", f"a/{rel}", "--label", f"b/{rel}",
                                   str(REPO / rel), tmp.name], capture_output=True, text=True,
                                   timeout=120).stdout
        if not diff:
            sys.exit(f"{name}: the recipe changes nothing in {rel}")
        parts.append(diff)
    (WEAKENED / name).write_text("".join(parts))
    print(f"wrote {WEAKENED / name}")


def repinned_payload(old: str, new: str) -> dict[str, Edit]:
    """An edit of the payload together with its new pin, so that the copy passes verify."""
    payload = (REPO / PAYLOAD).read_text()
    edited = replace(old, new)(payload, PAYLOAD)
    before = hashlib.sha256(payload.encode()).hexdigest()
    after = hashlib.sha256(edited.encode()).hexdigest()
    return {PAYLOAD: lambda text, path: edited, "mutants/pins.json": replace(before, after)}


def main() -> int:
    make("t04-sockets-bound-through.patch",
         [f"{T4}::test_engine_paths_are_not_even_sockets_inside_the_run"],
         "every listening socket found outside is bound read-only into the sandbox instead of masked "
         "with /dev/null (a read-only bind does not stop connect()), and the probe's P3 check is skipped",
         {"supervisor/isolation/plan.py": regex(r"^(\s*)masked = sockets_to_mask\([^)]*\)",
                                      r"\1masked = tuple(sockets)"),
          "supervisor/isolation/policy.py": replace('argv += ["--ro-bind", "/dev/null", path]',
                                          'argv += ["--ro-bind", path, path]'),
          "supervisor/isolation/probe.py": early_return("p3")})
    tcp_and_abstract = ("abstract:no-docker-engine", "tcp:127.0.0.1:2375", "tcp:[::1]:2375",
                        "tcp:127.0.0.1:2376", "tcp:127.0.0.1:4243")
    make("t03-share-net.patch",
         [f"{T3}::test_canary_recorded_nothing " + " ".join(f"{T4_PATH}[{p}]" for p in tcp_and_abstract),
          PROVE],
         "bwrap gets --share-net (the guard's network namespace: loopback ports and abstract sockets "
         "reachable) and the probe's P2 check is skipped (and its P12 try, which a shared network "
         "namespace also breaks: the sentinel bound outside then looks bound inside)",
         {"supervisor/isolation/policy.py": replace('argv += ["--unshare-all"]',
                                          'argv += ["--unshare-all", "--share-net"]'),
          "supervisor/isolation/probe.py": both(early_return("p2"), early_return("p12"))})
    make("t03-git-hooks-writable.patch",
         [f"{T3}::test_persistence_files_unchanged"],
         "the work dir's .git/hooks and .git/config (and start-up files) are no longer re-bound "
         "read-only, the probe's P4 write check is skipped, and the after-run audit reports nothing",
         {"supervisor/isolation/plan.py": regex(r"^(\s*)(draft = Policy\()", r"\1protected.clear()\n\1\2"),
          "supervisor/isolation/probe.py": early_return("p4_writes"),
          "supervisor/isolation/later_code.py": regex(
              r"^(    def changed\(self\) -> dict\[str, tuple\[str, str\]\]:\n(?:        .*\n)*?.*\"\"\"\n)",
              r"\1        return {}\n")})
    make("t05-guard-without-ssh-host.patch",
         [f"{T5_ROUTE}[ssh-host]"],
         "the outer guard no longer provides its ssh stand-in (the remote host of DOCKER_HOST=ssh://), "
         "so the control's ssh route reaches nothing",
         {"supervisor/proving/outer_guard.py": replace('            f"{self.bin}/ssh": SSH_STAND_IN,\n', "")})
    make("t05-payload-route-misses-its-port.patch",
         [f"{T5_ROUTE}[tcp-loopback-2375]"],
         "the payload's tcp-loopback-2375 route (re-pinned) dials 127.0.0.1:2374, where no engine "
         "listens: the isolated run still reaches nothing; only the positive control shows that the "
         "route stopped testing anything",
         repinned_payload("out=$(DOCKER_HOST=tcp://127.0.0.1:2375 timeout",
                          "out=$(DOCKER_HOST=tcp://127.0.0.1:2374 timeout"))
    make("t03-lifetime-sockets-allowed.patch",
         [f"{T3}::test_canary_recorded_nothing", PROVE],
         "the connect mediation lets a connect through to a pathname socket bound outside the run "
         "(and the probe's P12 try is skipped): the payload's lifetime routes reach the engines the "
         "harness restarts and starts during the run",
         {"supervisor/isolation/mediation.py": replace(
             "        if target == OUTSIDE_SOCKET:\n            return _OUTSIDE\n",
             "        if target == OUTSIDE_SOCKET:\n            return CONNECT\n"),
          "supervisor/isolation/probe.py": early_return("p12")})
    make("t05-lifetime-engine-not-restarted.patch",
         [f"{T5_ROUTE}[lifetime-restart]"],
         "the lifetime harness stops the engine but never binds its socket again: the isolated run "
         "still reaches nothing; only the positive control shows that the restart route stopped "
         "testing anything",
         {"supervisor/proving/lifetime.py": replace("                late.append(RESTART_SOCKET)\n", "")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
