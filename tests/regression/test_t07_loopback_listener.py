"""T-07: a loopback TCP listener started before the run is unreachable inside; a listener the
run opens itself is reachable inside (the run has its own loopback)."""

from __future__ import annotations

import json
import socket

from isolation_cases import inside_python, require_bwrap, run

INSIDE = r"""
import json, socket, sys
port = int(sys.argv[1])
out = {}
def attempt(label):
    s = socket.socket(); s.settimeout(3)
    try:
        s.connect(("127.0.0.1", port)); out[label] = "connected"
    except OSError as e:
        out[label] = e.errno
    finally:
        s.close()
attempt("outside-listener")
own = socket.socket(); own.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
own.bind(("127.0.0.1", port)); own.listen(1)
attempt("own-listener")
print(json.dumps(out))
"""


def test_outside_listener_unreachable_own_listener_reachable(tmp_path):
    require_bwrap()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        result = run(["--quiet", "--", *inside_python(INSIDE), str(port)], cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        said = json.loads(result.stdout)
        assert said["outside-listener"] != "connected", said
        assert said["own-listener"] == "connected", said
        try:
            listener.accept()
            raise AssertionError("the outside listener got a connection from the run")
        except BlockingIOError:
            pass
    finally:
        listener.close()
