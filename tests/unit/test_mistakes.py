"""A newcomer's mistakes (issue 54) as data: each row is a command line typed against a temp spec, the exit
code it must end with and what its message must say. Every row fails before a node is contacted. The
command runs through typer's CliRunner on corral.cli.main's app, with the exit mapping the console script
uses (cli/main.py `main`: a CorralError -> its exit_code, a click usage error -> 2)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from corral.cli.main import main

SPEC = (Path(__file__).parents[1] / "fixtures" / "spec" / "slurm_valid.yaml").read_text()
FPR = "EB693B3035CD5710E231E123A4B469963BF863CC"
GPG_FPR = "eb69 3b30 35cd 5710 e231  e123 a4b4 6996 3bf8 63cc"  # as gpg prints it, lower case


def spaced_fingerprints(text: str) -> str:
    return text.replace("slurm:\n", f'packages: {{fingerprint: "{GPG_FPR}"}}\n'
                                     f'nvidia: {{container_toolkit: {{repo_fingerprint: "{GPG_FPR}"}}}}\nslurm:\n', 1)


def gpu_model(model: str, extra: str = "") -> callable:
    return lambda text: text.replace("      model: h100\n", f"      model: {model}\n{extra}", 1)


# (id, spec edit, environment, argv (SPEC: the spec's path), exit code, substrings of the output)
ROWS = [
    # 1. bundle verify/diff read $CORRAL_SPEC (and --spec) like every command: a missing spec is said, exit 2
    ("bundle-verify-reads-CORRAL_SPEC", None, {"CORRAL_SPEC": "MISSING"}, ["bundle", "verify", "site.tar"], 2,
     ["missing.yaml: spec file not found"]),
    ("bundle-diff-reads-CORRAL_SPEC", None, {"CORRAL_SPEC": "MISSING"}, ["bundle", "diff", "a.tar", "b.tar"], 2,
     ["missing.yaml: spec file not found"]),
    ("bundle-verify-has---spec", None, {}, ["bundle", "verify", "site.tar", "--spec", "MISSING"], 2,
     ["missing.yaml: spec file not found"]),
    ("bundle-verify-spec-pin-from-CORRAL_SPEC", spaced_fingerprints, {"CORRAL_SPEC": "SPEC"},
     ["bundle", "verify", "site.tar", "--json"], 1, [f'"expected_fingerprint": "{FPR}"']),
    # 2. a fingerprint as gpg prints it is the same key: on the command line and in the spec
    ("fingerprint-option-as-gpg-prints-it", None, {}, ["bundle", "verify", "site.tar", "--json", "--fingerprint", GPG_FPR],
     1, [f'"expected_fingerprint": "{FPR}"']),
    ("fingerprint-option-not-hex", None, {}, ["bundle", "verify", "site.tar", "--fingerprint", "B53A E77B"], 2,
     ["is not a key fingerprint (40 hex digits"]),
    ("fingerprint-spec-fields-as-gpg-prints-them", spaced_fingerprints, {}, ["spec", "check", "-f", "SPEC"], 0, []),
    # 3. a GPU model of valid form that corral does not know: refused at the key, did you mean
    ("gpu-model-typo", gpu_model("hl00"), {}, ["spec", "check", "-f", "SPEC"], 2,
     ["cluster.yaml:18:14: GPU model corral does not know (got 'hl00'); fix: did you mean h100?",
      "model_unknown_ok: true"]),
    ("gpu-model-typo-refused-by-plan", gpu_model("hl00"), {}, ["plan", "-f", "SPEC"], 2,
     ["GPU model corral does not know (got 'hl00')"]),
    ("gpu-model-override-typo", lambda t: t.replace("      nvlink: true\n", "      nvlink: true\n    overrides:\n"
                                                    "      gpu02: {gpus: {model: a1000}}\n", 1), {},
     ["spec", "check", "-f", "SPEC"], 2, ["GPU model corral does not know (got 'a1000'); fix: did you mean a100"]),
    ("gpu-model-unknown-ok-warns", gpu_model("x900", "      model_unknown_ok: true\n"), {},
     ["spec", "check", "-f", "SPEC"], 0, ["'x900' is not a GPU model corral knows"]),
    # 4. an unknown node names the flag the user typed, and the close names
    ("health---node-unknown", None, {}, ["health", "--node", "gpu9", "-f", "SPEC"], 2,
     ["--node names nodes that are not in the spec (got 'gpu9'); fix: gpu9: did you mean gpu01 or gpu02?"]),
    ("trust-NODE-unknown", None, {}, ["trust", "gpu09", "-f", "SPEC"], 2,
     ["NODE names nodes that are not in the spec (got 'gpu09'); fix: gpu09: did you mean gpu01 or gpu02?"]),
    ("facts---node-unknown", None, {}, ["facts", "--node", "gpu03", "-f", "SPEC"], 2,
     ["--node names nodes that are not in the spec (got 'gpu03')", "did you mean"]),
    ("apply---limit-unknown", None, {}, ["apply", "--limit", "ctl", "-f", "SPEC"], 2,
     ["--limit names nodes that are not in the spec (got 'ctl'); fix: ctl: did you mean ctl1?"]),
    # 5. restore of a file that is not there: the file is the mistake (usage, exit 2), not the backup key
    ("restore-missing-file", None, {}, ["restore", "nope.tar", "--yes", "-f", "SPEC"], 2,
     ["no backup file there (got 'nope.tar')", "corral backup"]),
    ("restore-missing-file-json", None, {}, ["restore", "nope.tar", "--yes", "--json", "-f", "SPEC"], 2,
     ['"ok": false', "no backup file there"]),
    # 6. render --node: `corral spec show` lists the nodes; did you mean
    ("render---node-unknown", None, {}, ["render", "--node", "gpu9", "-o", "out", "-f", "SPEC"], 2,
     ["--node gpu9: no such node in the spec (got 'gpu9'); fix: did you mean gpu01 or gpu02?",
      "`corral spec show` lists them"]),
    # 7. fanout --deploys: an unknown deploy is unknown (did you mean), a known one that cannot run alone is said
    ("fanout-deploy-typo", None, {}, ["fanout", "--deploys", "helth", "-f", "SPEC"], 2,
     ["no deploy named 'helth'", "did you mean 'health'?"]),
    ("fanout-deploy-not-node-local", None, {}, ["fanout", "--deploys", "munge", "-f", "SPEC"], 2,
     ["deploy 'munge' cannot run node-locally yet"]),
]


@pytest.mark.parametrize("edit,env,argv,code,said", [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_mistake(tmp_path, monkeypatch, edit, env, argv, code, said):
    spec = tmp_path / "cluster.yaml"
    spec.write_text(edit(SPEC) if edit else SPEC)
    paths = {"SPEC": str(spec), "MISSING": str(tmp_path / "missing.yaml")}
    monkeypatch.chdir(tmp_path)  # relative files (site.tar, nope.tar, out) are the temp dir's
    runner = CliRunner()
    with runner.isolation(env={k: paths.get(v, v) for k, v in env.items()}) as streams:
        rc = main([paths.get(a, a) for a in argv])
        sys.stdout.flush(), sys.stderr.flush()
        out, err = (s.getvalue().decode() if s is not None else "" for s in streams[:2])  # click 8.2: a third
    text = out + err
    assert rc == code, text
    for part in said:
        assert part in " ".join(text.split()) or part in text, text
    if "--json" in argv:
        json.loads(out)  # one object, also when it fails
