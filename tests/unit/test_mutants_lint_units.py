"""The lint's small pure pieces: word evaluation, printf, endpoints, requests, paths, options."""

from __future__ import annotations

import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st
from no_docker.mutants.bash_parser import first_unsafe, mask_unsafe
from no_docker.mutants.lint import (
    Opaque,
    Val,
    ansi_c_decode,
    const,
    endpoint_ok,
    lint_source,
    printf_output,
    request_ok,
    route_log_target,
    run_dir_path,
    split_options,
)

SAFE_TEXT = st.text(st.characters(blacklist_characters="%\\\0", blacklist_categories=("Cs",)), max_size=40)


@settings(max_examples=200, deadline=None)
@given(SAFE_TEXT.filter(lambda s: not s.startswith("-")), st.lists(SAFE_TEXT, max_size=4))
def test_printf_percent_s_repeats_the_format_for_every_argument(prefix, args):
    # A format starting with "-" is an option to printf: refused below, not computed.
    out = printf_output([const(prefix + "%s\\n"), *map(const, args)])
    expected = "".join(prefix + a + "\n" for a in args) if args else prefix + "\n"
    assert out == expected


def test_printf_refuses_what_it_cannot_compute():
    assert printf_output([const("%d"), const("1")]) is None
    assert printf_output([Val((Opaque("x"),))]) is None
    assert printf_output([const("-v"), const("x")]) is None
    assert printf_output([const("-%s\\n"), const("x")]) is None
    assert printf_output([const("a%%b")]) == "a%b"


def test_ansi_c_decoding():
    assert ansi_c_decode(r"\x64ocker\t\101\n\\") == "docker\tA\n\\"


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["127.0.0.1", "localhost", "[::1]"]), st.integers(1, 65535))
def test_loopback_endpoints_are_ok(host, port):
    assert endpoint_ok(const(f"tcp://{host}:{port}"))
    assert endpoint_ok(const(f"ssh://user@{host}:{port}"))


def test_endpoints_elsewhere_or_opaque_hosts_are_not():
    assert endpoint_ok(const("unix:///run/docker.sock"))
    assert endpoint_ok(Val(("unix://", Opaque("HOME"), "/.docker/run/docker.sock")))
    assert not endpoint_ok(const("tcp://10.0.0.1:2375"))
    assert not endpoint_ok(const("tcp://127.0.0.1.evil.example:2375"))
    assert not endpoint_ok(Val(("tcp://", Opaque("HOST"), ":2375")))
    assert not endpoint_ok(const("fd://"))
    assert not endpoint_ok(const("npipe:////./pipe/docker_engine"))


def test_request_ok_is_one_read_only_request_without_body():
    assert request_ok("GET /_ping?route=x HTTP/1.0\r\nHost: d\r\nX-No-Docker-Route: x\r\n\r\n")
    assert request_ok("HEAD /v1.50/_ping HTTP/1.1\r\n\r\n")
    assert not request_ok("POST /containers/prune HTTP/1.0\r\n\r\n")
    assert not request_ok("GET /containers/x/json HTTP/1.0\r\n\r\n")
    assert not request_ok("GET /_ping HTTP/1.0\r\n\r\nDELETE /images/x HTTP/1.0\r\n\r\n")
    assert not request_ok("GET /_ping HTTP/1.0\r\nX-HTTP-Method-Override: DELETE\r\n\r\n")
    assert not request_ok("GET /_ping HTTP/1.0\r\n")


def test_run_dir_paths_and_the_route_log():
    assert run_dir_path(const("./no-docker-x/y.json"))
    assert not run_dir_path(const("Makefile"))
    assert not run_dir_path(const("./no-docker-x/../../.bashrc"))
    assert not run_dir_path(const("/tmp/no-docker-x"))
    assert not run_dir_path(Val(("./no-docker-", Opaque("X"))))
    assert route_log_target(Val((Opaque("NO_DOCKER_ROUTE_LOG:-./no-docker-routes.log"),)))
    assert route_log_target(Val((Opaque("NO_DOCKER_ROUTE_LOG"),)))
    assert not route_log_target(Val((Opaque("NO_DOCKER_ROUTE_LOG:-/etc/profile"),)))


def test_split_options_handles_bundles_attached_values_and_unknowns():
    flags, values = {"-s", "-S", "--silent"}, {"-o", "-X", "--request"}
    assert split_options("-sS", flags, values) == [("-s", None), ("-S", None)]
    assert split_options("-sXPOST", flags, values) == [("-s", None), ("-X", "POST")]
    assert split_options("-so", flags, values) == [("-s", None), ("-o", "")]
    assert split_options("--request=GET", flags, values) == [("--request", "GET")]
    assert split_options("-sz", flags, values) is None
    assert split_options("--silent=1", flags, values) is None


def test_assignment_values_do_not_split_but_unquoted_uses_do():
    assert lint_source('x="label=a b"\ndocker ps --filter "$x"') == []
    assert lint_source('x="label=a b"\ndocker ps --filter $x')[0].code == "engine-option-not-allowed"
    (finding,) = lint_source('x=$(id -un)\ndocker $x ps')
    assert finding.code == "dynamic-engine-subcommand"


def test_constant_only_after_and_inside_its_block():
    assert lint_source('( d=docker; "$d" ps )') == []
    assert lint_source('( d=docker ); "$d" ps')[0].code == "dynamic-command-name"
    assert lint_source('"$d" ps; d=docker')[0].code == "dynamic-command-name"
    # eval shares the shell: an assignment in its text is outside the subset (issue 17)
    assert lint_source("d=docker; eval 'd=rm'; \"$d\" ps")[0].code == "unsupported"


def test_a_character_that_crashes_tree_sitter_bash_is_a_finding_not_a_segfault(tmp_path):
    """tree-sitter-bash 0.25.1 segfaults on ``a{`` + U+E0100; the lint must report it, never
    hand it to the parser. Run in a child: a regression fails this test, not the session."""
    crash = tmp_path / "crash.sh"
    crash.write_text("echo ok\neval 'a{\U000e0100'\n")
    done = subprocess.run([sys.executable, "-m", "no_docker.supervisor.cli", "mutants", "lint", str(crash)],
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (
        1, f"{crash}:2:9: parse-error: character U+E0100 is beyond U+FFFF, where tree-sitter-bash "
        "can crash; not parsed\n"), done.stderr


def test_invalid_utf8_inside_nested_programs_and_helpers_gets_a_verdict():
    # bash -c / eval texts and here-documents are re-encoded from the source's own bytes.
    assert lint_source(b"bash -c 'echo \xff'") == []
    assert lint_source(b"eval 'echo \xfe'") == []
    [finding] = lint_source(b"python3 -I - <<'EOF'\nprint('\xff')\nEOF\n")
    assert finding.code == "python-not-pinned-helper"
    assert lint_source("echo \ud800") == []


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(max_codepoint=0xFFFF, blacklist_categories=("Cs",)), max_size=30),
       st.characters(min_codepoint=0x10000), st.text(max_size=10))
def test_first_unsafe_points_at_the_first_astral_character(before, astral, after):
    source = (before + astral + after).encode()
    head = before.encode()
    assert first_unsafe(source) == (head.count(b"\n"), len(head) - (head.rfind(b"\n") + 1), astral)
    assert first_unsafe(head) is None
    masked = mask_unsafe(before + astral + after)
    assert first_unsafe(masked.encode()) is None and len(masked) == len(before + astral + after)


def test_nesting_deeper_than_python_recursion_is_rejected_not_a_traceback():
    for deep in ("( " * 3000 + "true" + " )" * 3000, 'echo "' + "$(" * 3000 + "true" + ")" * 3000 + '"'):
        findings = lint_source(deep)
        assert ("unsupported-syntax", "nested deeper than the lint can follow") in [
            (f.code, f.message) for f in findings], findings[:3]
