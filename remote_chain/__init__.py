"""remote-chain: self-chaining Slurm jobs that outlive one allocation, driven over SSH."""

__version__ = "0.1.0"
