"""T-08: an outside socket listing that cannot be parsed refuses the run (125) and CMD never
runs. The malformed listing is real: a listening socket whose name holds a newline makes
``/proc/net/unix`` print a line that is not one."""

from __future__ import annotations

import socket

from isolation_cases import require_bwrap, run


def test_socket_name_with_newline_refuses_the_run(tmp_path):
    require_bwrap()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "evil\nthis is not a proc-net-unix line"))
    sock.listen(1)
    marker = tmp_path / "cmd-ran"
    try:
        result = run(["--", "sh", "-c", f"touch {marker}"], cwd=tmp_path)
    finally:
        sock.close()
    assert result.returncode == 125, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "listing refused" in lines[0] and "cannot parse" in lines[0], result.stderr
    assert not marker.exists()
