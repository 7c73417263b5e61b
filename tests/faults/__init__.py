"""Fault injection, bad input and security on the real dev cluster.

The figures they produce: docs/reliability.md.
"""
