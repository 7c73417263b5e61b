"""PURE: the chaining rules and what they read and decide, with no I/O.

``models`` (job ids, Slurm states, chain states), ``rules`` (the spec's decision table),
``durations``, ``limits``, ``sacct`` (Slurm's command lines and their parsers),
``chainstatus`` and ``runstatus`` (a chain's state from its files, sacct and squeue),
``results`` and ``records`` (what the flows return, and its one JSON encoder). Nothing here
imports anyio, asyncssh, tenacity or structlog, or defines anything async
(tests/test_layers.py holds every module of this folder to that).
"""
