"""The canary engine: a fake Docker/Podman engine that records every attempt before it answers.

A neutral witness: nothing here imports ``no_docker.supervisor`` or ``no_docker.mutants``.

- ``sniff``     what the first bytes of a connection are (pure)
- ``records``   the log's records: build, encode, parse, ``route_of`` (pure)
- ``recorder``  the only writer of the log: one ``os.write`` per record, ``seq`` without gaps
- ``engine``    what to answer, Docker Engine API 1.50 / libpod (pure)
- ``framing``   where each request of a connection begins and ends, HTTP/1.x (pure)
- ``server``    listeners, the connection protocol: frame, record, then answer
- ``show``      the log as a table and counts (pure)
- ``process``   start a canary as a child and wait until it accepts (tests, benchmarks, prove)
- ``cli``       ``no-docker canary serve|show`` and ``python -m no_docker.canary``
"""
