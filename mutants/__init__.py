"""Mutant payloads: read-only routes to an engine, their lint, pins, review and apply."""
