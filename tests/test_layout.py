"""The run folder's protocol has one home (layout.py): no other module or template
spells its names, every template placeholder comes from the one map, and run folders written
before the record had a ``schema_version`` (version 1) are still read by every command."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from test_cli import CONFIG, NO_SECRET, World, _chains, _items, _run_id, world  # noqa: F401 (the fixture)

from remote_chain.core.chainstatus import parse_events
from remote_chain.core.models import JobId
from remote_chain.execs.resume import uncounted_jobs
from remote_chain.execs.templates import PER_RENDER, PLACEHOLDER, render_template, template_subs
from remote_chain.protocol import layout
from remote_chain.protocol.layout import time_limits

PACKAGE = Path(__file__).resolve().parent.parent / "remote_chain"
TEMPLATES = sorted([*(PACKAGE / "execs").glob("*.bash"), *(PACKAGE / "job").glob("*.bash")])
# The run folder's own names (interface.md §3); ordinary words (files, logs) are not policed.
SPELLINGS = (".gym_", ".remote_chain_", "job.sh", "remote-chain.json")

# A record exactly as a version-1 submit wrote it (no schema_version field).
RECORD_V1 = (
    '{"run_id": "rc-20260101-000000-abcd", "cluster": "eos", "created": "2026-01-01T00:00:00Z",'
    ' "executor": "slurm", "run_dir": "/work/rc-20260101-000000-abcd/eos", "chains": ['
    '{"benchmark": "gpqa", "remote_dir": "/work/rc-20260101-000000-abcd/eos/gpqa",'
    ' "job_name": "rc-20260101-000000-abcd:gpqa", "resumable": true, "time_limit_s": 3600,'
    ' "first_job_id": "1001", "error": null}, '
    '{"benchmark": "smoke", "remote_dir": "/work/rc-20260101-000000-abcd/eos/smoke",'
    ' "job_name": "rc-20260101-000000-abcd:smoke", "resumable": false, "time_limit_s": null,'
    ' "first_job_id": null, "error": "sbatch: error: invalid partition"}]}\n'
)


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            ids.add(id(first.value))
    return ids


def _code_lines(path: Path) -> list[tuple[int, str]]:
    """A template's lines without its comments (a comment may name a file, as prose)."""
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        code = line.split("  # ", 1)[0]
        if not code.lstrip().startswith("#"):
            out.append((n, code))
    return out


def test_no_other_module_spells_a_run_folder_name() -> None:
    """Every run-folder name is spelled in layout.py only: modules read its constants (docstrings
    and comments may name files as prose), templates get them by substitution."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "layout.py":
            continue
        tree = ast.parse(path.read_text())
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            text = node.value if isinstance(node, ast.Constant) else None
            if isinstance(text, str) and id(node) not in docs and any(s in text for s in SPELLINGS):
                found.append(f"{path.relative_to(PACKAGE)}: {text!r}")
    for path in TEMPLATES:
        for n, code in _code_lines(path):
            if any(s in code for s in SPELLINGS):
                found.append(f"{path.parent.name}/{path.name}:{n}: {code.strip()}")
    assert found == []


def test_the_policing_test_sees_a_spelled_name(tmp_path: Path) -> None:
    """The check above is not vacuous: a literal in code is found, a docstring is not."""
    source = '"""Reads job.sh."""\nNAME = ".remote_chain_events"\n'
    tree = ast.parse(source)
    docs = _docstrings(tree)
    spelled = [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    ]
    assert spelled == [".remote_chain_events"]
    template = tmp_path / "t.bash"
    template.write_text("# reads job.sh\nx=job.sh  # job.sh\ny=__JOB__\n")
    assert [c for _, c in _code_lines(template) if "job.sh" in c] == ["x=job.sh"]


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.name)
def test_every_placeholder_comes_from_the_one_map(path: Path) -> None:
    """After rendering, no ``__NAME__`` is left in a template's code but per-render data."""
    rendered = render_template(path.name)
    left = {m.group() for line in rendered.splitlines() for m in PLACEHOLDER.finditer(line)}
    left = {p for p in left if not p.startswith("__RC_")}  # heredoc delimiters, not placeholders
    assert left <= PER_RENDER


def test_only_per_render_data_is_passed_by_callers() -> None:
    """No module keeps a substitution map of its own: render_template gets at most the payload."""
    extra = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "render_template"
                and len(node.args) > 1
            ):
                extra.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert {e.split(":")[0] for e in extra} <= {"execs/submit.py"}  # the submit's payload


def test_the_map_has_every_name_and_event_kind() -> None:
    """The one substitution map spells the run folder's names and every event kind as layout.py
    does."""
    subs = template_subs()
    assert subs["__JOB__"] == layout.JOB_SCRIPT
    assert subs["__RECORD__"] == layout.RECORD_FILE
    assert subs["__FIRST__"] == layout.FIRST_JOB_FILE
    for kind in layout.EventKind:
        assert subs[f"__EV_{kind.name}__"] == kind.value


def test_the_prologue_writes_the_event_kinds_status_reads() -> None:
    """Each kind the prologue writes is a member of the enum status and resume read through."""
    prologue = render_template("prologue.bash")
    written = set()
    for line in prologue.splitlines():
        if 'rc_event "' in line:
            written.add(line.split('rc_event "', 1)[1].split()[0].rstrip('"'))
    assert written
    assert written <= {k.value for k in layout.EventKind}
    assert {"decided", "successor", "end", "signal", "lease_broken"} <= written


# --- The run record -----------------------------------------------------------------------------
def _written(record: layout.RunRecord) -> str:
    """The record as submit.bash finishes it: the client's prefixes, then ids and errors."""
    tails = [
        (
            f'"{c.first_job_id}", "error": null}}'
            if c.first_job_id
            else f'null, "error": "{c.error}"}}'
        )
        for c in record.chains
    ]
    chains = ", ".join(
        layout.chain_prefix(c) + t for c, t in zip(record.chains, tails, strict=True)
    )
    return layout.record_head(record) + chains + "]}\n"


def test_the_record_round_trips_through_its_writer_and_reader() -> None:
    """A run record written as submit.bash finishes it parses back equal, at schema version 2, with
    its time limits readable."""
    record = layout.RunRecord(
        "rc-1",
        "eos",
        "2026-01-01T00:00:00Z",
        "slurm",
        "/w/rc-1/eos",
        (
            layout.ChainRecord("gpqa", "/w/rc-1/eos/gpqa", "rc-1:gpqa", True, 600, "17", None),
            layout.ChainRecord("b", "/w/rc-1/eos/b", "rc-1:b", False, None, None, "no partition"),
        ),
    )
    text = _written(record)
    assert json.loads(text)["schema_version"] == layout.SCHEMA_VERSION == 2
    assert layout.parse_record(text) == record
    assert time_limits(text) == {"gpqa": 600}


def test_a_version_1_record_is_still_read() -> None:
    """A record written before schema_version existed reads as version 1, every field kept."""
    record = layout.parse_record(RECORD_V1)
    assert record is not None
    assert record.schema_version == 1
    assert [c.benchmark for c in record.chains] == ["gpqa", "smoke"]
    assert record.chains[0].first_job_id == "1001"
    assert record.chains[1].error == "sbatch: error: invalid partition"
    assert time_limits(RECORD_V1) == {"gpqa": 3600}
    # Early version-1 records had no time_limit_s at all.
    early = json.loads(RECORD_V1)
    for chain in early["chains"]:
        del chain["time_limit_s"]
    assert time_limits(json.dumps(early)) == {}
    # A resume appends to it and keeps it as written (no schema_version added).
    updated = layout.with_resume(RECORD_V1, {"at": "2026-01-02T00:00:00Z", "chains": []})
    assert updated is not None
    assert "schema_version" not in json.loads(updated)
    assert json.loads(updated)["resumes"] == [{"at": "2026-01-02T00:00:00Z", "chains": []}]


@pytest.mark.parametrize("text", ["", "{", "[]", '{"run_id": "x"}', '{"chains": 3}'])
def test_what_is_not_a_record_reads_as_none(text: str) -> None:
    """Text that is not a run record parses as None and gives no time limits."""
    assert layout.parse_record(text) is None
    assert time_limits(text) == {}


def test_version_1_events_are_read_through_the_enum() -> None:
    """Event lines as the previous prologue wrote them (the kinds never change)."""
    events = parse_events(
        "1700000000 1001 decided start none none 0 0\n"
        "1700000000 1001 successor 1002\n"
        "1700000100 1001 end signalled 143 100 TERM\n"
        "1700000200 1002 decided resume 1001 TIMEOUT 100 0\n"
        "1700000300 1003 counted_by_resume 60\n"
    )
    assert [e.kind for e in events] == [
        layout.EventKind.DECIDED,
        layout.EventKind.SUCCESSOR,
        layout.EventKind.END,
        layout.EventKind.DECIDED,
        layout.EventKind.COUNTED_BY_RESUME,
    ]
    ids = [JobId("1001"), JobId("1002"), JobId("1003")]
    assert uncounted_jobs(ids, events) == ["1002"]


# --- A run folder written by the previous release ------------------------------------------------
def test_status_logs_resume_cancel_read_a_version_1_run_folder(
    world: World,  # noqa: F811 (the fixture imported above)
) -> None:
    """A chain submitted before schema_version existed: its record is rewritten in the
    version-1 shape, and every command still reads the folder and the record."""
    world.config.write_text(  # no secret: a failed chain's secrets are gone, resume refuses it
        NO_SECRET.replace('"echo hello-from-the-job"', '"echo hello-from-the-job; exit 3"')
    )
    submitted = world.submit()
    run_id = _run_id(submitted)
    remote = {s["benchmark"]: Path(str(s["remote_dir"])) for s in _items(submitted, "submissions")}
    record_path = remote["gpqa"].parent / layout.RECORD_FILE
    record = json.loads(record_path.read_text())
    assert record.pop("schema_version") == 2
    record["chains"][0]["time_limit_s"] = 3600
    record_path.write_text(json.dumps(record) + "\n")  # the version-1 writer's shape
    # ... and its local index, which kept no time limits (status reads them from the record).
    entry_path = world.tmp / "state" / "remote-chain" / "runs" / f"{run_id}.json"
    entry = json.loads(entry_path.read_text())
    for cluster in entry["clusters"].values():
        assert cluster.pop("time_limits") == {}  # this release's: no chain has a --time
    entry_path.write_text(json.dumps(entry))
    v1 = layout.parse_record(record_path.read_text())
    assert v1 is not None
    assert v1.schema_version == 1

    eos = world.cluster("eos")
    ids = {s["benchmark"]: str(s["job_id"]) for s in _items(submitted, "submissions")}
    eos.run_job(ids["smoke"])  # echoes, then exits 3
    chains = _chains(world.json("status", run_id))
    assert chains["eos/smoke"]["state"] == "failed"
    assert chains["eos/gpqa"]["state"] == "pending"
    assert chains["eos/gpqa"]["time_limit_s"] == 3600  # read from the version-1 record

    logs = world.invoke("logs", run_id, "--benchmark", "smoke")
    assert logs.exit_code == 0, logs.stderr
    assert "hello-from-the-job" in logs.stdout

    (entry,) = _items(world.json("resume", run_id, "--benchmark", "smoke"), "resumed")
    assert entry["error"] is None, entry
    assert eos.job(str(entry["job_id"])).script == eos.job(ids["smoke"]).script

    cancelled = world.json("cancel", run_id)
    entries = {e["benchmark"]: e for e in _items(cancelled, "cancelled")}
    assert entries["gpqa"]["job_ids"] == [ids["gpqa"]]
    assert entries["smoke"]["job_ids"] == [entry["job_id"]]
    assert eos.queue() == {}
