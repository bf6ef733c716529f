"""The spec reference cannot drift: docs/spec.md is `corral spec reference`'s output, every spec field
has a description, the example in it loads, and `corral spec schema` prints a JSON Schema."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from corral.cli.main import main
from corral.spec.loader import load_text
from corral.spec.models import ClusterSpec, HealthSpec, Partition, SlurmSpec
from corral.spec.reference import fields, markdown, type_name

DOC = Path(__file__).resolve().parents[2] / "docs" / "spec.md"


def test_docs_spec_md_is_generated_from_the_models():
    assert DOC.read_text() == markdown(), \
        "docs/spec.md differs from the spec models: run `corral spec reference > docs/spec.md`"


def test_every_field_has_a_description():
    missing = [key for key, field in fields() if not (field.description or "").strip()]
    assert not missing, f"spec fields without Field(description=...): {missing}"


def test_every_section_is_walked():
    keys = {key for key, _ in fields()}
    assert {"name", "ssh.jump_host", "nodes[].overrides.<name>.gpus.count", "nodes[].gpus.mig[].profiles",
            "monitoring.alerts.receivers[].webhook", "nvidia.enroot.settings", "nvidia.mig_parted.sha256",
            "virtual.subnet", "slurm.extra", "slurm.partitions[].extra"} <= keys
    assert len(keys) > 100


@pytest.mark.parametrize("key", ["slurm.def_mem_per_gpu_mb", "slurm.partitions[].priority_tier",
                                 "slurm.qos[].max_jobs_per_user", "slurm.extra", "slurm.partitions[].extra"])
def test_docs_name_the_fields_they_once_missed(key):
    assert f"| `{key}` |" in DOC.read_text()


def test_descriptions_name_the_slurm_settings():
    text = markdown()
    for key, setting in (("slurm.partitions[].max_time", "MaxTime"),
                         ("slurm.fairshare.decay_half_life", "PriorityDecayHalfLife"),
                         ("slurm.def_mem_per_gpu_mb", "DefMemPerGPU"), ("health.interval_s", "HealthCheckInterval"),
                         ("identity.pam_slurm_adopt", "PrologFlags")):
        row = next(line for line in text.splitlines() if line.startswith(f"| `{key}` |"))
        assert setting in row, row


def test_readable_types():
    assert type_name(HealthSpec.model_fields["mounts"].annotation) == "list of absolute path"
    f = Partition.model_fields["max_time"]
    assert type_name(f.annotation, f.metadata) == "Slurm duration"
    f = SlurmSpec.model_fields["gres_autodetect"]
    assert type_name(f.annotation, f.metadata) == "`off` or `nvml`"
    f = ClusterSpec.model_fields["nodes"]
    assert type_name(f.annotation, f.metadata) == "list of mapping (at least 1)"
    assert "| `monitoring.grafana.repo_url` | https URL | `https://apt.grafana.com` |" in markdown()
    assert "| `slurm.qos[].max_wall` | Slurm duration | `null` |" in markdown()
    assert "| `monitoring.port` |" not in markdown()


def test_markdown_keeps_the_hand_written_prose():
    text = markdown()
    for heading in ("## Roles", "## String values by meaning", "## Checks before any SSH",
                    "## Importing DeepOps", "## Pass-through slurm.conf keys"):
        assert heading in text
    for line in text.splitlines():  # a table row per field: key | type | default | description
        if line.startswith("| `"):
            assert line.count(" | ") - line.count("\\|") >= 3 and line.endswith(" |"), line


def test_the_example_in_the_docs_loads():
    yaml = re.search(r"```yaml\n(.*?)```", DOC.read_text(), re.S).group(1)
    yaml = yaml.replace("<sha256 of the source tarball>", "a" * 64).replace("<sha256>", "b" * 64)
    cluster = load_text(yaml, "cluster.yaml")
    assert cluster.spec.slurm.extra["MaxJobCount"] == "20000"
    assert cluster.spec.slurm.partitions[1].extra == {"MaxNodes": "1", "AllowAccounts": "research"}


def test_spec_schema_prints_a_json_schema(capsys):
    assert main(["spec", "schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert "properties" in schema and "nodes" in schema["properties"]
    assert schema["required"] == ["name", "nodes"]
    assert "description" in schema["properties"]["name"]
    assert "extra" in schema["$defs"]["SlurmSpec"]["properties"]


def test_spec_reference_prints_the_docs(capsys):
    assert main(["spec", "reference"]) == 0
    assert capsys.readouterr().out == markdown()
