"""The support matrix as data: for each release x component x source a spec can ask for
(spec/support_asks.py), Live, Offline or Refused (spec/support.py), with the test that proves it.

Facts not proven by a test here, and where they come from:
- NVIDIA's CUDA repository publishes a debian13 suite (https://developer.download.nvidia.com/compute/cuda/repos/
  debian13/x86_64/, cuda-keyring_1.1-1_all.deb, signed by 02182E60104FCDC26EAE1B8597A5D4CB8793F200, not
  debian12's key); it was not reachable from the machine that wrote this, so its index was not read: every
  cell of NVIDIA's repository is offline at best.
- DCGM's documentation (docs.nvidia.com/datacenter/dcgm/latest, "Supported Linux Distributions") lists
  Debian 12, Ubuntu 22.04 and 24.04 and RHEL 9, not Debian 13.
- Debian's non-free section, read with apt in a private configuration (2026-12-08): bookworm has
  nvidia-driver 535.261.03 (bookworm-security 535.309.01), nvidia-tesla-535-driver 535.216.03 and
  nvidia-cuda-toolkit 11.8; trixie nvidia-driver 550.163.01, nvidia-tesla-535-driver 535.274.02 and
  nvidia-cuda-toolkit 12.4. Neither has Fabric Manager, DCGM, NCCL, the container toolkit, enroot or Grafana.
Pure data: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from corral.spec.releases import RELEASES, deployable
from corral.spec.support import Live, Offline, Refused, State

U = "tests/unit/"
V = "tests/vcluster/"
UBUNTU = ("ubuntu-22.04", "ubuntu-24.04")
NOT_LIVE = "not run on a live Ubuntu node"
NVIDIA_NOT_READ = "NVIDIA's repository was not reachable here: its index was not read and nothing was installed from it"
STANDIN = "a TEST stand-in package from the virtual cluster's repository"
DCGM_MISSING: Mapping[str, str] = MappingProxyType({
    "debian-13": "NVIDIA publishes no DCGM for Debian 13 (DCGM's supported distributions list Debian 12)"})
NO_DCGM_FIX = "run the GPU nodes on debian-12"
DEB13_VENDOR_BUNDLE = Refused(
    "a bundle carries the vendors' repositories for debian-12 nodes only (bundle/build.py resolves their "
    "debian12 paths)", "take it from the vendor's repository or a site mirror (packages.source: mirror), or "
                       "run these nodes on debian-12")
T = {  # the tests the cells name
    "rollout": V + "test_rollouts.py::test_first_apply_installs_and_pins_the_driver_through_a_reboot",
    "air_driver": V + "test_bundle.py::test_the_driver_comes_from_the_cuda_repository_through_the_bundle",
    "air_cuda": V + "test_bundle.py::test_module_load_cuda_as_alice_in_her_shell_and_her_job",
    "air_downloads": V + "test_bundle.py::test_pinned_downloads_come_from_the_bundle",
    "air_up": V + "test_bundle.py::test_up_from_the_bundle_alone_validates",
    "bench_cuda": V + "test_workbench.py::test_module_avail_and_load_in_her_login_shell",
    "deb13_driver": V + "test_debian13.py::test_distribution_driver_from_non_free",
    "driver_pkg": U + "test_nvidia_driver.py::test_driver_package_per_os",
    "repo_paths": U + "test_monitoring_render.py::test_cuda_repository_paths",
    "deb13_key": U + "test_monitoring_render.py::test_debian_13_suite_is_pinned_to_its_own_key",
    "fm": U + "test_nvidia_driver.py::test_fabric_manager_follows_the_driver_branch",
    "vendor_cuda": U + "test_bundle_vendor.py::test_what_a_spec_takes_from_the_cuda_repository",
    "vendor_mirror": U + "test_bundle_vendor.py::test_a_mirror_key_and_an_overridden_package",
    "archive_toolkit": U + "test_nvidia_driver_ops.py::test_cuda_toolkit_from_debian_13s_archive_with_its_module",
    "cuda_ops": U + "test_nvidia_driver_ops.py::test_cuda_toolkit_once_on_compute_and_login_nodes_container_toolkit_on_gpu_nodes",
    "nccl": U + "test_validate_acceptance.py::test_nccl_across_nodes_runs_one_mpi_job_over_every_gpu",
    "dcgm": U + "test_monitoring_render.py::test_dcgm_on_real_gpu_compute_nodes_only",
    "exporter": U + "test_monitoring_render.py::test_dcgm_exporter_unit_and_pin",
    "ctk": U + "test_nvidia_driver_ops.py::test_container_toolkit_source_and_pin",
    "vendor_repos": U + "test_bundle_vendor.py::test_the_container_toolkit_and_grafana_repositories_with_their_pinned_keys",
    "enroot_live": V + "test_workbench.py::test_enroot_is_installed_and_configured_from_the_spec",
    "pyxis_live": V + "test_workbench.py::test_pyxis_is_built_against_the_installed_slurm_on_every_node",
    "enroot": U + "test_containers.py::test_enroot_script_downloads_for_the_node_arch_checks_and_installs",
    "pyxis": U + "test_containers.py::test_pyxis_script_checks_the_source_before_building_and_records_the_slurm_it_used",
    "bundle_dl": U + "test_bundle_downloads.py::test_a_bundle_now_carries_enroot_and_pyxis",
    "apptainer_live": V + "test_workbench.py::test_apptainer_runs_a_site_registry_image_with_her_gpu_in_a_job",
    "slurm12": V + "test_slurm.py::test_every_compute_node_idle_with_typed_gres",
    "slurm13": V + "test_debian13.py::test_apply_gives_slurm_24_11",
    "slurm_26": V + "test_debian13.py::test_upgrade_applied_in_order_and_every_daemon_at_26_05",
    "bundle_26": V + "test_debian13.py::test_a_bundle_for_debian_13_carries_slurm_26_05",
    "bundle_render": U + "test_render_slurm_files.py::test_bundle_source_key_and_sources_from_the_bundle",
    "slurm_upgrade": U + "test_slurm_upgrade.py::test_slurms_order_backup_slurmdbd_slurmctld_then_slurmd_in_batches",
    "slurm_more": U + "test_slurm_more.py::test_a_real_cluster_asking_for_a_slurm_its_release_lacks_is_warned_where_it_comes_from",
    "golden": U + "test_release_golden.py::test_golden",
    "ubuntu_pkgs": U + "test_release_rows.py::test_every_package_corral_installs_is_in_the_ubuntu_release_under_the_same_name",
    "mon12": V + "test_monitoring.py::test_every_target_is_up_and_services_bind_the_cluster_address",
    "mon13": V + "test_workbench.py::test_registry_metrics_are_scraped",
    "grafana": U + "test_monitoring_render.py::test_dashboards_are_valid_and_use_the_provisioned_datasource",
}


def _nvidia(rel: str) -> dict[str, dict[str, State]]:
    """The components of NVIDIA's apt repositories on a Debian or Ubuntu release."""
    deb12, deb13 = rel == "debian-12", rel == "debian-13"
    ubuntu_bundle = _ubuntu_bundle(rel) if rel in UBUNTU else None
    cuda_off = Offline(T["deb13_key"] if deb13 else T["repo_paths"], NVIDIA_NOT_READ)
    cuda_mirror = Offline(T["vendor_mirror"], "a site mirror of NVIDIA's repository on a live node"
                          + (" (the bundle test builds from one; the rollout runs live on debian-13)" if deb12 else ""))
    bundle = ubuntu_bundle or (DEB13_VENDOR_BUNDLE if deb13 else None)
    rows: dict[str, dict[str, State]] = {
        "driver": {"vendor": cuda_off,
                   "mirror": Live(T["rollout"], STANDIN + "; cuda-keyring from a mirror not run") if deb13 else cuda_mirror,
                   "bundle": bundle or Live(T["air_driver"], "a TEST stand-in of NVIDIA's repository, signed by its own "
                                                             "key, carried by the bundle")},
        "fabric-manager": {"vendor": Offline(T["fm"], "no NVSwitch system here: Fabric Manager never installed"),
                           "mirror": Offline(T["fm"], "no NVSwitch system here: Fabric Manager never installed"),
                           "bundle": bundle or Offline(T["vendor_cuda"], "no NVSwitch system here: carried, never installed")},
        "cuda-toolkit": {"vendor": Offline(T["cuda_ops"], NVIDIA_NOT_READ),
                         "mirror": Live(T["bench_cuda"], "corral's stand-in nvcc (virtual/cuda_standin.py)") if deb13
                         else Offline(T["cuda_ops"], "the toolkit from a site mirror on a live node"),
                         "bundle": bundle or Live(T["air_cuda"], "a TEST stand-in toolkit carried by the bundle")},
        "nccl": {"vendor": Offline(T["nccl"], NVIDIA_NOT_READ), "mirror": Offline(T["nccl"], "NCCL on a live node"),
                 "bundle": bundle or Offline(T["vendor_cuda"], "NCCL from a bundle on a live node")},
        "container-toolkit": {"vendor": Offline(T["ctk"], "NVIDIA's libnvidia-container repository (stable/deb, the same "
                                                          "for every release) was not reached; skipped on virtual clusters"),
                              "mirror": Offline(T["ctk"], "a site mirror of it on a live node"),
                              "bundle": bundle or Offline(T["vendor_repos"], "skipped on virtual clusters: never installed")},
    }
    for name, key in (("dcgm", "nvidia.dcgm.enabled"), ("dcgm-exporter", "monitoring.dcgm_exporter.enabled")):
        if rel in DCGM_MISSING:
            no = Refused(DCGM_MISSING[rel], f"set {key}: false, or {NO_DCGM_FIX}")
            rows[name] = {"vendor": no, "mirror": no, "bundle": no}
        else:
            test = T["dcgm"] if name == "dcgm" else T["exporter"]
            skipped = "skipped on virtual clusters (emulated GPUs): never installed"
            rows[name] = {"vendor": Offline(test, f"{NVIDIA_NOT_READ}; {skipped}"), "mirror": Offline(test, skipped),
                          "bundle": bundle or Offline(T["vendor_cuda"], skipped)}
    return rows


def _ubuntu_bundle(rel: str) -> Refused:
    """check_bundle's refusal (spec/rules_bundle.py): bundles are resolved for Debian nodes."""
    return Refused("bundles are resolved for debian-12 and debian-13 nodes only",
                   f"use packages.source: mirror for {rel} nodes, or one release for every node", rule="check_bundle")


def _containers(rel: str) -> dict[str, dict[str, State]]:
    deb13 = rel == "debian-13"
    bundle = _ubuntu_bundle(rel) if rel in UBUNTU else None
    github = "NVIDIA's GitHub release was not reached (no registry here carries it)"
    return {
        "enroot": {"vendor": Offline(T["enroot"], github),
                   "mirror": Live(T["enroot_live"], "a TEST stand-in .deb at the spec's url") if deb13
                   else Offline(T["enroot"], "installed live on debian-13 nodes only" if rel == "debian-12" else NOT_LIVE),
                   "bundle": bundle or (Live(T["air_downloads"], "a TEST stand-in .deb carried by the bundle")
                                        if rel == "debian-12" else Offline(T["bundle_dl"], "a Debian 13 bundle applied"))},
        "pyxis": {"vendor": Offline(T["pyxis"], github),
                  "mirror": Live(T["pyxis_live"], "a TEST stand-in source at the spec's url") if deb13
                  else Offline(T["pyxis"], "built live on debian-13 nodes only" if rel == "debian-12" else NOT_LIVE),
                  "bundle": bundle or Offline(T["bundle_dl"], "a bundle's pyxis built on a live node")},
    }


def _apptainer(rel: str) -> dict[str, State]:
    """spec/rules_apptainer.py refuses corral's apptainer off debian-13, and from a real node's own apt sources."""
    mirror = Offline(T["apptainer_live"], "a site mirror's apptainer package: installed as it comes, not run")
    if rel == "debian-13":
        return {"mirror": Live(T["apptainer_live"], "Debian unstable's apptainer 1.4.5-2 from the virtual cluster's "
                                                    "repository"),
                "distribution": Refused("Debian 13's archive has no apptainer package", "build a bundle that carries "
                                        "it (`corral bundle build`) and install from it (packages.source: bundle)",
                                        rule="check_apptainer"),
                "bundle": Offline(T["apptainer_live"], "a bundle carrying it applied to a live node")}
    no = Refused(f"corral's apptainer is Debian unstable's, for debian-13 nodes only (its libraries are newer than "
                 f"{rel}'s)", "run these nodes on debian-13", rule="check_apptainer")
    return {"distribution": no, "mirror": mirror, "bundle": _ubuntu_bundle(rel) if rel in UBUNTU else no}


def _slurm_and_monitoring(rel: str) -> dict[str, dict[str, State]]:
    deb12, deb13 = rel == "debian-12", rel == "debian-13"
    ub = rel in UBUNTU
    bundle = _ubuntu_bundle(rel) if ub else None
    grafana = "skipped on virtual clusters: Grafana's repository (apt.grafana.com) was not reached"
    return {
        "slurm": {"distribution": Live(T["slurm12"] if deb12 else T["slurm13"]) if not ub else Offline(T["golden"], NOT_LIVE),
                  "bundle": bundle or (Live(T["air_up"]) if deb12 else Offline(T["bundle_26"], "a bundle of 24.11 applied"))},
        "slurm-newer": {
            "mirror": Live(T["slurm_26"], "Debian unstable's 26.05 from the virtual cluster's repository") if deb13
            else Offline(T["slurm_upgrade"] if deb12 else T["slurm_more"], "a repository with a newer Slurm for "
                         + ("Debian 12 on a live node (the shared cluster's has 22.05 only)" if deb12 else "Ubuntu")),
            "bundle": bundle or (Offline(T["bundle_26"], "26.05 only (virtual/slurm_more.py); nodes installing from it")
                                 if deb13 else Offline(T["bundle_render"], "a bundle built on a host whose apt sources "
                                                       "carry a newer Slurm for Debian 12 (its archive has 22.05)"))},
        "prometheus": {"distribution": Live(T["mon12"] if deb12 else T["mon13"]) if not ub else Offline(T["ubuntu_pkgs"], NOT_LIVE),
                       "bundle": bundle or Offline(T["air_up"], "Prometheus from a bundle queried on a live node")},
        "grafana": {"vendor": Offline(T["grafana"], grafana), "mirror": Offline(T["grafana"], grafana),
                    "bundle": bundle or (DEB13_VENDOR_BUNDLE if deb13 else Offline(T["vendor_repos"], grafana))},
    }


def _undeployable(rel: str) -> dict[str, dict[str, State]]:
    """Every cell of a release corral cannot deploy: spec/rules_os.py refuses the group's os:."""
    apt = ", ".join(n for n, r in RELEASES.items() if deployable(r))
    no = Refused(f"corral cannot deploy {rel} nodes yet (it installs with {RELEASES[rel].family})",
                 f"run these nodes on {apt}", rule="check_os")
    rows = {**_nvidia("debian-12"), **_containers("debian-12"), "apptainer": _apptainer("debian-12"),
            **_slurm_and_monitoring("debian-12")}
    return {c: {s: no for s in cells} | ({"distribution": no} if c in ("driver", "cuda-toolkit") else {})
            for c, cells in rows.items()}


def _row(rel: str) -> dict[str, dict[str, State]]:
    if not deployable(RELEASES[rel]):
        return _undeployable(rel)
    rows = {**_nvidia(rel), **_containers(rel), "apptainer": _apptainer(rel), **_slurm_and_monitoring(rel)}
    rows["driver"]["distribution"] = DISTRIBUTION_DRIVER[rel]
    rows["cuda-toolkit"]["distribution"] = DISTRIBUTION_TOOLKIT[rel]
    return rows


DISTRIBUTION_DRIVER: Mapping[str, State] = MappingProxyType({
    "debian-12": Refused("corral installs no driver from Debian 12's archive (bookworm non-free has 535.261.03, "
                         "not in spec/nvidia_archive.py)", "use nvidia.driver.source: cuda on debian-12"),
    "debian-13": Live(T["deb13_driver"], "Debian 13's non-free driver"),
    "ubuntu-22.04": Offline(T["driver_pkg"], "Ubuntu's nvidia-driver-<branch>-server: " + NOT_LIVE),
    "ubuntu-24.04": Offline(T["driver_pkg"], "Ubuntu's nvidia-driver-<branch>-server: " + NOT_LIVE),
})

NO_ARCHIVE_TOOLKIT = "use nvidia.cuda_toolkit.source: cuda (NVIDIA's repository)"
DISTRIBUTION_TOOLKIT: Mapping[str, State] = MappingProxyType({
    "debian-12": Refused("corral installs no CUDA toolkit from Debian 12's archive (bookworm non-free has "
                         "nvidia-cuda-toolkit 11.8, not in spec/nvidia_archive.py)", NO_ARCHIVE_TOOLKIT),
    "debian-13": Offline(T["archive_toolkit"], "Debian 13's nvidia-cuda-toolkit 12.4 (96 packages, 1.9 GB) is not "
                                               "installed by the test run; its plan and the cuda module are tested"),
    "ubuntu-22.04": Refused("corral installs no CUDA toolkit from Ubuntu's archive", NO_ARCHIVE_TOOLKIT),
    "ubuntu-24.04": Refused("corral installs no CUDA toolkit from Ubuntu's archive", NO_ARCHIVE_TOOLKIT),
})

MATRIX: Mapping[tuple[str, str, str], State] = MappingProxyType({
    (rel, c, s): state for rel in RELEASES for c, cells in _row(rel).items() for s, state in cells.items()})


def state(release: str, component: str, source: str) -> State | None:
    """The cell of a combination; None: the matrix has none (tests/unit/test_support_matrix.py fails on it)."""
    return MATRIX.get((release, component, source))


def dcgm_unavailable(release: str) -> str | None:
    """Why DCGM (and so dcgm-exporter) cannot be installed on `release`'s nodes; None where it can."""
    return DCGM_MISSING.get(release)
