"""The importer's table of DeepOps variables (corral.importers.deepops_vars) against the spec's JSON Schema
(`corral spec schema`): a reason that says cluster.yaml has no such setting is true, every key the table
maps to exists, and a DeepOps variable with a corral equivalent is mapped (never listed as unsupported)."""

from __future__ import annotations

import re
import typing

from corral.importers.deepops_inventory import GROUP_NOTES
from corral.importers.deepops_reasons import NO_SETTING, REASONS, Missing
from corral.importers.deepops_vars import BUILT_IN, KNOWN, MAPPED, reason
from corral.spec.models import ClusterSpec, Role

# DeepOps variables with a corral equivalent, written from DeepOps' config.example and corral's docs (not
# from the table): each must be mapped to a key under this schema path, or be built in
EQUIVALENTS = {
    "nfs_exports": "storage.exports", "nfs_mounts": "storage.mounts", "nfs_client_group": "storage.mounts[].nodes",
    "slurm_enable_nfs_server": "nodes[].roles", "slurm_allow_ssh_user": "identity.adopt_exempt_users",
    "slurm_restrict_node_access": "identity.pam_slurm_adopt", "slurm_version": "slurm.version",
    "gpu_operator_driver_version": "nvidia.driver.version", "http_proxy": "proxy.http", "https_proxy": "proxy.https",
    "no_proxy": "proxy.no_proxy", "users": "users", "slurm_default_job_timelimit": "slurm.partitions[].extra",
    "slurm_max_job_timelimit": "slurm.partitions[].max_time", "slurm_ha_state_save_location": "slurm.state_save_location",
    "slurm_autodetect_nvml": "slurm.gres_autodetect", "slurm_cluster_name": "name", "install_dcgm": "nvidia.dcgm.enabled",
    "cuda_version": "nvidia.cuda_toolkit.version", "nvidia_driver_package_version": "nvidia.driver.version",
    "enroot_version": "nvidia.enroot.version", "slurm_pyxis_version": "nvidia.pyxis.version",
    "kube_version": "kubernetes.version", "k8s_gpu_mig_strategy": "kubernetes.gpu_operator.mig_strategy",
}
BUILT_IN_EXPECTED = ("chrony_install", "deepops_gpu_operator_enabled", "slurm_manage_gpus", "slurm_configure_etc_hosts")
# DeepOps' name prefixes -> the spec section a same-named setting would be in (the mechanical check)
SECTIONS = {"slurm_pyxis_": "nvidia.pyxis.", "pyxis_": "nvidia.pyxis.", "slurm_": "slurm.",
            "nvidia_driver_": "nvidia.driver.", "enroot_": "nvidia.enroot.", "gpu_operator_": "kubernetes.gpu_operator.",
            "kube_": "kubernetes.", "k8s_": "kubernetes.", "cuda_": "nvidia.cuda_toolkit.", "dcgm_": "nvidia.dcgm.",
            "nfs_": "storage.", "ssh_": "ssh.", "grafana_": "monitoring.grafana.", "prometheus_": "monitoring.prometheus_",
            "chrony_": "", "users_": "identity."}


def schema_paths() -> set[str]:
    """Every property of cluster.yaml as a dotted path: lists as [], maps as .* (`slurm.partitions[].extra.*`)."""
    schema = ClusterSpec.model_json_schema()
    defs, out = schema.get("$defs", {}), set()

    def walk(node: dict, path: str, depth: int = 0) -> None:
        if depth > 30:
            return
        if "$ref" in node:
            return walk(defs[node["$ref"].split("/")[-1]], path, depth + 1)
        for sub in node.get("anyOf", []) + node.get("allOf", []) + node.get("oneOf", []):
            walk(sub, path, depth + 1)
        if isinstance(node.get("items"), dict):
            walk(node["items"], path + "[]", depth + 1)
        if isinstance(node.get("additionalProperties"), dict):
            out.add(path + ".*")
            walk(node["additionalProperties"], path + ".*", depth + 1)
        for key, sub in node.get("properties", {}).items():
            out.add(f"{path}.{key}" if path else key)
            walk(sub, f"{path}.{key}" if path else key, depth + 1)
    walk(schema, "")
    return out


PATHS = schema_paths()


def schema_path(key: str) -> str:
    """A table key ('slurm.partitions[batch].extra.DefaultTime (note)') as a schema path."""
    path = re.sub(r"\[[^\]]*\]", "[]", key.split(" ")[0])
    parent, _, _ = path.rpartition(".")
    return parent + ".*" if path not in PATHS and parent + ".*" in PATHS else path


def false_claims(claims: list[Missing]) -> list[str]:
    """Each claim of no setting whose words the schema has: 'what: path'."""
    return [f"{c.what}: {p}" for c in claims for rx in c.absent for p in sorted(PATHS) if re.search(rx, p)]


def all_claims() -> list[Missing]:
    reasons = [reason(v) for v in KNOWN] + list(REASONS) + [w for _, w in NO_SETTING]
    return list({r for r in reasons if isinstance(r, Missing)})


def test_the_schema_walk_sees_nested_and_listed_keys():
    assert {"storage.mounts[].nodes", "identity.pam_slurm_adopt", "slurm.partitions[].extra.*", "proxy.no_proxy",
            "kubernetes.gpu_operator.driver.source", "nvidia.enroot.settings.*"} <= PATHS


def test_no_reason_claims_a_setting_the_schema_has():
    claims = all_claims()
    assert len(claims) >= 15 and all(c.absent for c in claims)
    assert false_claims(claims) == []


def test_the_claim_check_catches_a_false_claim():
    """The check above fails on the reasons issue 34 found untrue (had they been kept)."""
    old = [Missing("proxy setting", (r"proxy",)), Missing("pam_slurm_adopt setting", (r"pam_slurm_adopt",)),
           Missing("such Kubernetes setting", (r"^kubernetes\.gpu_operator",)),
           Missing("Slurm version setting", (r"^slurm\.version$",))]
    assert len(false_claims(old)) >= 4


def test_other_reasons_do_not_claim_a_missing_setting_in_prose():
    """A claim of no setting is a Missing (checked above), never free text."""
    prose = [str(r) for r in list(REASONS) + [w for _, w in NO_SETTING] + [w for w, _ in BUILT_IN.values()]
             if not isinstance(r, Missing)]
    assert [p for p in prose if re.search(r"cluster\.yaml has no|no such (Slurm|Kubernetes) setting", p)] == []


def test_group_notes_name_roles_cluster_yaml_lacks():
    roles = set(typing.get_args(Role))
    for note in GROUP_NOTES.values():
        m = re.search(r"has no (.+) role", note)
        assert m is None or not {w for w in re.split(r"[- ]", m.group(1)) if w} & roles, note


def test_every_mapped_key_is_in_the_schema():
    assert {v: schema_path(k) for v, k in MAPPED.items() if schema_path(k) not in PATHS} == {}


def test_variables_with_a_corral_equivalent_are_mapped():
    for var, path in EQUIVALENTS.items():
        assert path in PATHS, path
        assert var in MAPPED and schema_path(MAPPED[var]).startswith(path), (var, MAPPED.get(var), reason(var))
    assert set(BUILT_IN_EXPECTED) <= set(BUILT_IN)


def test_no_unmapped_variable_names_a_setting_of_its_section():
    """Mechanical: a known variable that is not mapped, whose name (prefix -> section, the rest -> key) is a
    schema path, has a corral equivalent it does not use."""
    found = []
    for var in KNOWN:
        if var in MAPPED or var in BUILT_IN:
            continue
        prefix = next((p for p in SECTIONS if var.startswith(p)), None)
        rest = var[len(prefix):] if prefix else var
        section = SECTIONS.get(prefix, "") if prefix else ""
        for candidate in (section + rest, section + rest.replace("_", ".")):
            if candidate in PATHS:
                found.append(f"{var} -> {candidate}")
    assert found == []
