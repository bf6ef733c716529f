"""`corral render` writes every file apply writes, for every component (issue 48), checked against what the run's
record keeps of each op: every declared component of each golden spec (tests/unit/golden_ops.py: virtual, features,
kubernetes-ha) prepared and planned offline for a fresh node, as plan and apply prepare them.

- Every file an op uploads is one it declares it installs (deploy/installs.py), so the record (results.OpResult.files,
  the journal) is complete: else the upload is a staging file the same op removes again (the SQL that sets the
  accounting password, chpasswd's input, a venv's wheels).
- Per node, render writes exactly the recorded paths (PATH.corral-block: corral's block in PATH), each with the
  recorded sha256; a secret file with a placeholder where each secret is and the rest as apply writes it; a file made
  on the node from what is there (an edit of the node's own file, a record of its state) is named in NOTES.txt.

tests/vcluster/test_monitoring.py checks the same against a live apply's journal.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from pathlib import Path

import pytest
from pyinfra.api import FileUploadCommand, StringCommand

from corral.deploy.installs import BLOCK
from corral.engine import run_context
from corral.facts.slurm import save_hw_cache
from corral.spec.loader import load
from corral.workflows.render_files import _safe, render
from tests.unit.golden_ops import ADMIN_FILES, SPECS, prepared_ops, seed_secrets, write_spec

PLACEHOLDER = re.compile(rb"<secret:not-rendered:[^>\n]*>")
STAGED = ".corral-new"  # install_commands' temporary name, renamed over the path


def _prepare(spec: str, directory: Path, monkeypatch):
    """The spec's cluster, its prepared ops per node, the run's context; and the hardware facts the run read in
    the state dir's cache, where render reads them."""
    cluster = load(write_spec(spec, directory))
    seed_secrets(cluster)
    ctx = run_context.RunContext(mode="plan")
    ops = prepared_ops(cluster, SPECS[spec].hw, monkeypatch, ctx=ctx)
    if SPECS[spec].hw:
        save_hw_cache(cluster.state_dir, SPECS[spec].hw)
    return cluster, ops, ctx


@pytest.fixture(scope="module", params=sorted(SPECS))
def prepared(request, tmp_path_factory):
    """(spec, cluster, ops, ctx, render's summary, its directory), once per spec for the module's tests."""
    mp = pytest.MonkeyPatch()
    try:
        directory = tmp_path_factory.mktemp(request.param)
        cluster, ops, ctx = _prepare(request.param, directory, mp)
    finally:
        mp.undo()
    done = render(cluster, directory / "rendered")  # after the prepare: what apply made on the control host is there
    return request.param, cluster, ops, ctx, done, directory / "rendered"


def _text(command) -> str:
    return command.get_raw_value() if isinstance(command, StringCommand) else str(command)


def _removed_later(path: str, later: list) -> bool:
    """A later command of the same op removes `path` (a staging file, not one the node keeps)."""
    return any("rm -" in t and path in t for t in (_text(c) for c in later if not isinstance(c, FileUploadCommand)))


def test_every_file_an_op_uploads_is_one_it_declares(prepared):
    spec, _, ops, _, _, _ = prepared
    undeclared = []
    for node, blocks in ops.items():
        for name, _, note, commands, _ in blocks:
            declared = {f["path"] for f in note.get("files", [])}
            for i, c in enumerate(commands):
                if not isinstance(c, FileUploadCommand):
                    continue
                path = c.dest.removesuffix(STAGED)
                if path in declared or path + BLOCK in declared or _removed_later(path, commands[i + 1:]):
                    continue
                undeclared.append(f"{node}: {name}: {path}")
    assert not undeclared, (f"spec {spec}: uploads no declaration names (the run's record and render miss them; "
                            "declare them with deploy/installs.py's @installs):\n" + "\n".join(undeclared))


def _recorded(blocks) -> dict[str, dict]:
    """path -> what the node's ops record of it (the last op that installs it wins, as on the node)."""
    return {f["path"]: f for _, _, note, _, _ in blocks for f in note.get("files", [])}


def _secret_values(state_dir: Path) -> list[bytes]:
    """Every secret value a file may hold, longest first: the state dir's secrets (not the certificates corral's CA
    signed: public) in each form corral writes them (golden_ops.Placeholders: as is, hex, sha256, a word of it), the
    admin's secret files (whole, and each side of a `user:password`)."""
    values: set[bytes] = set()
    for path in (p for p in (state_dir / "secrets").rglob("*") if p.is_file() and p.suffix != ".pem"):
        data = path.read_bytes()
        values |= {data.strip(), data.hex().encode(), hashlib.sha256(data.strip()).hexdigest().encode(),
                   *(word for word in data.split() if len(word) >= 16)}
    for text, mode in ADMIN_FILES.values():
        if mode == 0o600:
            values |= {text.strip().encode(), *(part.encode() for part in text.strip().split(":", 1))}
    return sorted((v for v in values if len(v) >= 8), key=len, reverse=True)


def _without_secrets(data: bytes, values: list[bytes]) -> bytes:
    for value in values:
        data = data.replace(value, b"SECRET")
    return data.strip()


def test_render_writes_every_recorded_file_with_its_content(prepared):
    spec, cluster, ops, ctx, done, out = prepared
    notes = "\n".join(done["notes"])
    secrets = _secret_values(Path(cluster.state_dir))
    problems = []
    for node, blocks in ops.items():
        recorded = _recorded(blocks)
        written = set(done["files"].get(node, []))
        wanted = {p for p, f in recorded.items() if not f["from_node"]}
        problems += [f"{node}: {p}: apply writes it, render does not" for p in sorted(wanted - written)]
        problems += [f"{node}: {p}: render writes it, apply does not" for p in sorted(written - wanted)]
        problems += [f"{node}: {p}: made on the node, not named in NOTES.txt" for p in sorted(recorded)
                     if recorded[p]["from_node"] and p.removesuffix(BLOCK) not in notes]
        for path in sorted(wanted & written):
            ours, f = (out / node / _safe(path)).read_bytes(), recorded[path]
            content, _ = ctx.installs[node][path]
            theirs = content.encode() if isinstance(content, str) else content
            if f["secret"]:
                if not PLACEHOLDER.search(ours) or _without_secrets(ours, secrets) != ours.strip():
                    problems.append(f"{node}: {path}: a secret file without its placeholder, or with a secret")
                elif PLACEHOLDER.sub(b"SECRET", ours).strip() != _without_secrets(theirs, secrets):
                    problems.append(f"{node}: {path}: differs from apply's past its secrets")
            elif hashlib.sha256(ours).hexdigest() != f["sha256"]:
                diff = difflib.unified_diff(theirs.decode(errors="replace").splitlines(),
                                            ours.decode(errors="replace").splitlines(), "apply", "render", lineterm="")
                problems.append(f"{node}: {path}: content differs:\n  " + "\n  ".join(list(diff)[:12]))
    assert not problems, f"spec {spec}: render and the run's record differ:\n" + "\n".join(problems)


def test_render_writes_no_secret(prepared):
    spec, cluster, _, _, _, out = prepared
    secrets = _secret_values(Path(cluster.state_dir))
    leaked = [str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()
              and _without_secrets(p.read_bytes(), secrets) != p.read_bytes().strip()]
    assert not leaked, f"spec {spec}: a secret value in {leaked}"
