"""``python -m no_docker.canary serve|show ...``: the same as ``no-docker canary ...``."""

import sys

from .cli import main

sys.exit(main(sys.argv[1:]))
