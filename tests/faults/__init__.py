"""Fault injection, bad input and security on the real dev cluster (issue 6).

The figures they produce: docs/reliability.md.
"""
