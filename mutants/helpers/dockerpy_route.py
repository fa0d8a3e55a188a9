"""no-docker docker-py route helper: docker.from_env() lists containers by route label.

Pinned in mutants/pins.json and embedded verbatim in the payload; runs with ``python3 -I``.
The only requests are docker-py's version negotiation and GET /containers/json with the
filter label=no-docker-route=ID: read-only. Exit 0 reached, 1 failed, 69 docker-py missing.
"""

import sys

route = sys.argv[1] if len(sys.argv) == 2 else ""
if not route:
    print("usage: dockerpy_route ROUTE-ID")
    sys.exit(2)
try:
    import docker
except ImportError as err:
    print(f"docker-py not importable: {err}")
    sys.exit(69)
try:
    listed = docker.from_env(timeout=2).containers.list(filters={"label": f"no-docker-route={route}"})
except Exception as err:  # docker-py wraps socket errors in several types
    print(f"{type(err).__name__}: {str(err)[:120]}")
    sys.exit(1)
print(f"listed {len(listed)} containers")
sys.exit(0)
