"""The canary engine: a fake Docker/Podman engine that records every attempt before it answers."""
