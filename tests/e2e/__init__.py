"""End to end on the real dev cluster (``scripts/dev-cluster up``): real sshd, real Slurm."""
