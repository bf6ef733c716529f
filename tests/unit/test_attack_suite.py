"""The attacker's suite, indexed: every reproduction of security reviews one to three (docs/security.md) and the test
that must fail to escalate it, with where it runs from. Each is marked `attack`, so `pytest -m attack tests` runs
the suite alone (the vcluster cases on their clusters: test_workbench.py's has every feature on). A case taken away,
renamed or unmarked fails here; a new surface adds its cases to SUITE."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VC, UNIT = "tests/vcluster", "tests/unit"

# reproduction -> (vantage, [path::test])
SUITE: dict[str, tuple[str, list[str]]] = {
    "N1 the hub's batchspawner API with her server's token": ("alice, inside her notebook's job; in her kernel", [
        f"{VC}/attacks_hub.py::test_attack_a_servers_token_cannot_change_what_the_hub_runs",
        f"{VC}/attacks_notebook.py::test_attack_from_her_notebook"]),
    "N1 the hub runs as root": ("an operator's ps on login1", [
        f"{VC}/attacks_hub.py::test_the_hub_and_its_proxy_do_not_run_as_root"]),
    "N2 validate's token shown to her server": ("alice's own server config, during validate", [
        f"{VC}/attacks_hub.py::test_attack_validates_check_shows_her_server_no_token_beyond_her_own"]),
    "N10 a REST spawn's template values": ("alice, the hub's REST API", [
        f"{VC}/attacks_hub.py::test_attack_a_rest_spawn_sets_nothing_but_the_checked_request"]),
    "N3/N14 root's fixed scratch paths in /var/tmp (the venv races)": ("scan of every remote command", [
        f"{UNIT}/test_root_scratch.py::test_no_fixed_scratch_path_in_a_world_writable_directory"]),
    "N4 fan-out wheels taken without a hash": ("the control host's fetch", [
        f"{UNIT}/test_fanout_wheels.py::test_nothing_unpinned_is_fetched_and_pip_checks_the_pinned_hashes",
        f"{UNIT}/test_fanout_wheels.py::test_a_wheel_member_under_a_name_the_installed_distribution_lacks_is_refused"]),
    "N5 registry pushes": ("alice and the image maker on login1; alice's kernel", [
        f"{VC}/images.py::test_only_the_push_group_pushes_and_never_over_the_loaders_images",
        f"{VC}/attacks_notebook.py::test_attack_from_her_notebook",
        f"{UNIT}/test_registry_auth.py::test_a_member_never_pushes_into_the_loaders_repositories"]),
    "N5 registry deletes": ("alice on login1, with a token of hers", [
        f"{VC}/images.py::test_she_cannot_delete_an_image_from_the_site_registry"]),
    "N6 podman storage squatted": ("alice on login1; alice's kernel on a GPU node", [
        f"{VC}/images.py::test_her_podman_storage_is_hers_and_nobody_can_make_another_users_first",
        f"{VC}/attacks_notebook.py::test_attack_from_her_notebook",
        f"{UNIT}/test_userdirs.py::test_a_directory_someone_else_made_first_is_never_handed_over"]),
    "N7 cron/at and GPU processes outside any job": ("a compute node's audit; the epilog", [
        f"{UNIT}/test_audit.py::test_cron_and_at_on_a_job_confined_compute_node_are_roots_alone",
        f"{UNIT}/test_jobclean.py::test_a_users_gpu_process_outside_any_job_is_ended_not_drained_for"]),
    "N8 and round two: bundle symlinks": ("a hostile bundle and base image", [
        f"{UNIT}/test_untar.py::test_hostile_archives_are_refused_with_nothing_written",
        f"{UNIT}/test_virtual_node_tree.py::test_prepare_refuses_before_it_writes_anything"]),
    "round two: the forged bundle": ("an attacker's key in the carried keyring", [
        f"{UNIT}/test_bundle_trust.py::test_the_forged_bundle_is_refused_by_prepare_and_the_cli"]),
    "round two: forged Xid lines": ("alice's job on a GPU node; the kernel log's user text", [
        f"{VC}/test_security_node.py::test_a_users_crash_named_after_an_xid_leaves_the_node_up",
        f"{UNIT}/test_health_xid.py::test_user_text_in_any_kernel_message_never_makes_an_xid",
        f"{UNIT}/test_health_hostile.py::test_a_users_segfault_named_after_an_xid_never_drains"]),
    "round two: the prolog's job name": ("alice's job name", [
        f"{VC}/test_security_node.py::test_a_job_name_naming_gpus_maps_a_cpu_job_to_none"]),
    "round two: fanout's imports from /tmp": ("alice's planted package in /tmp", [
        f"{VC}/test_security_root.py::test_fanout_never_imports_a_corral_package_a_user_planted_in_tmp"]),
    "round two: the exporter and validate as root": ("what alice can write", [
        f"{VC}/test_security_root.py::test_the_slurm_exporter_runs_unprivileged_cannot_read_the_bmc_credentials_and_serves",
        f"{VC}/test_security_root.py::test_validates_user_job_reads_her_output_as_her"]),
    "round two: identity and shared storage": ("alice on login1; the directory", [
        f"{VC}/test_security_identity.py::test_keys_only_where_users_log_in_and_alice_cannot_reach_the_controller",
        f"{VC}/test_security_identity.py::test_her_home_and_its_files_are_hers",
        f"{VC}/test_security_identity.py::test_ldap_ids_access_and_directory_collisions"]),
    "round two: hostile backups": ("a forged backup file", [
        f"{VC}/test_security_backup.py::test_hostile_backups_run_no_shell_and_change_nothing"]),
    "the REST API (slurm.rest): no token, an expired or another user's token, a node not a client": (
        "alice on login1 with curl; root's expired token; a compute node", [
            f"{VC}/test_users.py::test_alice_submits_and_queries_a_job_through_the_rest_api_with_her_own_token",
            f"{UNIT}/test_slurm_rest.py::test_the_table_lets_only_the_clients_and_the_node_itself_reach_the_port"]),
    "the class: anything undeclared that listens or runs as root": ("corral audit, as an operator", [
        f"{VC}/audit.py::test_a_planted_root_listener_is_reported_and_fails_the_audit"]),
}


def _marked(path: Path, name: str) -> bool:
    """`name` is a function of `path` marked pytest.mark.attack (or the module is)."""
    tree = ast.parse(path.read_text())
    module = any(isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)
                 and "attack" in ast.unparse(n.value) for n in tree.body)
    for n in tree.body:
        if isinstance(n, ast.FunctionDef) and n.name == name:
            return module or any("mark.attack" in ast.unparse(d) for d in n.decorator_list)
    raise AssertionError(f"{path.relative_to(ROOT)} has no {name}")


@pytest.mark.parametrize("finding", sorted(SUITE))
def test_every_reproduction_has_a_marked_case(finding):
    for case in SUITE[finding][1]:
        path, name = case.split("::")
        assert _marked(ROOT / path, name), f"{case} is not marked attack"


def test_every_vcluster_case_runs_in_ci():
    """A vcluster case in a module without test_ prefix runs only where a test module imports it."""
    for _, cases in SUITE.values():
        for case in cases:
            path, name = case.split("::")
            if Path(path).name.startswith("test_"):
                continue
            importers = [p for p in (ROOT / VC).glob("test_*.py") if name in p.read_text()]
            assert importers, f"{case}: no vcluster test module imports it"


def test_the_issues_list_is_covered():
    """What issue 47 names as the suite's reproductions: each has a case."""
    named = ("batchspawner", "validate's token", "/var/tmp", "registry pushes", "registry deletes", "podman storage",
             "cron", "forged Xid", "job name", "fanout's imports", "bundle symlinks")
    for what in named:
        assert any(what in finding for finding in SUITE), what
