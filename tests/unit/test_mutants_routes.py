"""Route tags and the route log: the contract the T-series and `prove` read."""

from __future__ import annotations

import pytest
from no_docker.mutants.routes import RouteError, canary_addresses, parse_route_log, parse_routes


def test_tags_parse_in_order_with_lines():
    text = "#!/bin/bash\n# route: a-1 (network) first\nx\n# route: b (persistence) second one\n"
    routes = parse_routes(text)
    assert [(r.id, r.kind, r.description, r.line) for r in routes] == [
        ("a-1", "network", "first", 2), ("b", "persistence", "second one", 4)]


@pytest.mark.parametrize("tag", ["# route: Bad (network) x", "# route: a (netwrk) x", "# route: a network x",
                                 "# route: a_b (network) x"])
def test_malformed_tags_are_errors_naming_the_line(tag):
    with pytest.raises(RouteError, match=r"p\.sh:2:"):
        parse_routes(f"x\n{tag}\n", "p.sh")


def test_duplicate_ids_are_errors():
    with pytest.raises(RouteError, match="already declared on line 1"):
        parse_routes("# route: a (network) x\n# route: a (network) y\n")


def test_route_log_last_line_wins_and_noise_is_skipped():
    log = ("a attempted failed exit 7: refused\nnoise from a tool\n"
           "b attempted unavailable socat not found\na attempted reached 200\r\nc attempted written\n")
    assert parse_route_log(log) == {"a": ("reached", "200"), "b": ("unavailable", "socat not found"),
                                    "c": ("written", "")}


def test_canary_addresses_fill_home_and_runtime_dir_and_drop_aliases(tmp_path):
    addresses = canary_addresses(str(tmp_path) + "/", "/run/user/1000")
    assert f"{tmp_path}/.docker/run/docker.sock" in addresses["unix"]
    assert "/run/user/1000/podman/podman.sock" in addresses["unix"]
    assert "127.0.0.1:2375" in addresses["tcp"] and "[::1]:2375" in addresses["tcp"]
    assert addresses["abstract"] == ["no-docker-engine"]
    assert len(addresses["unix"]) == len(set(addresses["unix"]))
