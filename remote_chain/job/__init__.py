"""PURE: what runs in the allocation: ``job.sh`` (``script``), its prologue (``prologue.bash``)
with the decision generated from ``core.rules``, and the runner."""
