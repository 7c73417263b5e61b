"""A client exec goes without its comments and indentation (``_template._compact``): bash must
run the very same code. bash itself is the judge: ``declare -f`` lists a function's code as
bash parsed it (no comments, its own layout), so each template, as written and compacted, is
made one function's body and the two listings must be equal. A comment line inside a quoted
string, or an indented line after a ``\\`` that lost its space, would change the listing."""

from __future__ import annotations

import subprocess
from importlib import resources

import pytest

from remote_chain import _template
from remote_chain._template import JOB_TEMPLATES, render_template

CLIENT_TEMPLATES = sorted(
    p.name
    for p in resources.files("remote_chain").joinpath("templates").iterdir()
    if p.name.endswith(".bash") and p.name not in JOB_TEMPLATES
)


def _listing(body: str) -> str:
    """bash's own listing of ``body`` as a function's code."""
    script = f"__rc_compact_probe() {{\n{body}\n}}\ndeclare -f __rc_compact_probe\n"
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-s"],
        input=script,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert not done.stderr, done.stderr
    return done.stdout


def test_every_client_template_is_found() -> None:
    assert "status.bash" in CLIENT_TEMPLATES
    assert "submit.bash" in CLIENT_TEMPLATES
    assert "prologue.bash" not in CLIENT_TEMPLATES


@pytest.mark.parametrize("name", CLIENT_TEMPLATES)
def test_compacting_changes_no_code(name: str) -> None:
    written = _template._rendered(name)  # the uncompacted form, to compare with
    compact = render_template(name)
    assert len(compact) < len(written)
    assert "\n#" not in compact
    assert _listing(compact) == _listing(written)


def test_the_check_sees_a_change_inside_a_string() -> None:
    """The comparison can fail: a '#' line inside a multi-line string is code to bash."""
    written = "x='a\n  # not a comment here\nb'\necho \"$x\""
    compact = "\n".join(
        line.lstrip() for line in written.splitlines() if not line.lstrip().startswith("#")
    )
    assert _listing(compact) != _listing(written)


def test_the_job_script_keeps_its_comments() -> None:
    """job.sh is read by people: the prologue is sent as written."""
    assert "\n# " in render_template("prologue.bash")
