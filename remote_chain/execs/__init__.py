"""PURE: what runs on the login node: one module per exec (render and parse) beside its bash.

``submit`` (the whole run's upload and sbatch), ``status`` (every chain's files, one squeue,
one sacct), ``cancel``, ``resume``, ``logs``, ``doctor``; ``templates`` loads the bash and
holds the one substitution map of every template (names from ``protocol``, the vocabulary
from ``core``); ``guard.bash`` and ``wire.bash`` are included by every exec.
"""
