"""Running a bit of Python as another local user: the dev cluster's unprivileged test user.

For the tests that a private socket (the agent's) refuses every other
user: a real second uid on the same machine, never a mock of the check.
"""

from __future__ import annotations

import os
import subprocess

TEST_USER = os.environ.get("REMOTE_CHAIN_DEV_USER", "rcuser")
# The system interpreter: the test user may not execute root's pyenv one.
USER_PYTHON = "/usr/bin/python3"


def as_test_user(args: list[str]) -> subprocess.CompletedProcess[str]:
    """``python -c args[0] args[1:]`` as ``TEST_USER``."""
    return subprocess.run(
        ["runuser", "-u", TEST_USER, "--", USER_PYTHON, "-c", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
