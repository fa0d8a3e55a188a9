"""T-08: an outside socket listing that cannot be read whole refuses the run (125) and CMD never
runs: a socket missing from the listing is a socket nobody tried, so the listing never
degrades to "nothing listed".

The listing comes from the kernel's sock_diag netlink dump (T-46: names no local user can
make ambiguous), so a malformed one is a garbled or cut-short kernel reply. It is injected
here, in the supervisor process only, by a test-only prelude: the real dump's bytes are cut
in the middle of a message before they are parsed.
"""

from __future__ import annotations

import subprocess
import sys

from isolation_cases import require_bwrap

GARBLE = """
import sys
from no_docker.supervisor.isolation import sockdiag
_parse = sockdiag.parse_dump
def garbled(data, seq=None):
    return _parse(data[:len(data) - 7] if len(data) > 40 else data, seq)  # a message cut short
sockdiag.parse_dump = garbled
sockdiag.DiagSocket._dump.__defaults__ = (garbled,)
from no_docker.supervisor import cli
sys.exit(cli.main(sys.argv[1:]))
"""


def test_a_listing_that_cannot_be_parsed_refuses_the_run(tmp_path):
    require_bwrap()
    marker = tmp_path / "cmd-ran"
    result = subprocess.run([sys.executable, "-c", GARBLE, "run", "--", "sh", "-c", f"touch {marker}"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 125, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "listing refused" in lines[0] and "netlink" in lines[0], result.stderr
    assert not marker.exists()


def test_the_parser_refuses_every_cut_of_a_real_dump():
    # The same, pure: every prefix of a real dump that ends inside a message is refused, never
    # read as a shorter listing.
    from no_docker.supervisor.isolation import sockdiag

    with sockdiag.open_diag() as diag:
        diag.sock.send(sockdiag.unix_request(7))
        data = diag.sock.recv(65536)
    payloads, _ = sockdiag.parse_dump(data, 7)
    assert payloads, "the dump of this namespace is empty: nothing to cut"
    cuts = 0
    for end in range(1, len(data)):
        try:
            sockdiag.parse_dump(data[:end], 7)
        except sockdiag.SockDiagError:
            cuts += 1
            continue
        # A cut at a message boundary is a shorter *datagram*, not a whole dump: no DONE.
        assert sockdiag.parse_dump(data[:end], 7)[1] is False, end
    assert cuts > len(data) // 2
