"""Helpers of ``scripts/bench``: statistics and the table (pure), the dev-cluster rig (proxies,
profiles, logging shims), the baselines, and one module per measurement."""
