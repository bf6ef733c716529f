"""DeepOps' NVIDIA and container variables -> cluster.yaml's `nvidia:` (driver, dcgm, cuda_toolkit,
enroot, pyxis). What cannot be carried exactly is listed with the key to set instead: a driver branch
("580") is not the exact version corral pins, so `nvidia.driver` is written only when a full version
is known. DeepOps checks no download, so enroot and pyxis come with `sha256: skip` and a warning."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from corral.importers.deepops_inventory import Var
from corral.importers.deepops_report import MAPPED as MAPPED_GROUP, Report
from corral.importers.deepops_vars import MAPPED, truthy
from corral.spec.containers import EnrootSpec, PyxisSpec
from corral.spec.models import DriverSpec
from corral.spec.schedulers import SCHEDULERS

DEEPOPS_ENROOT = "3.2.0"  # DeepOps' enroot when enroot_version is unset (nvidia.enroot role v0.5.0)
DEEPOPS_PYXIS = "0.11.1"  # DeepOps' roles/pyxis/defaults/main.yml slurm_pyxis_version
BRANCHES = ("nvidia_driver_ubuntu_branch", "nvidia_driver_rhel_branch", "nvidia_driver_branch")  # first wins
DRIVER_VARS = ("nvidia_driver_package_version", *BRANCHES, "nvidia_driver_ubuntu_use_open_kernel_modules",
               "nvidia_driver_ubuntu_install_from_cuda_repo", "nvidia_driver_ubuntu_cuda_package",
               "nvidia_driver_ubuntu_cuda_repo_baseurl", "nvidia_driver_rhel_cuda_repo_baseurl")
CONTAINER_VARS = ("enroot_version", "enroot_release", "enroot_packages", "enroot_runtime_path", "enroot_cache_path",
                  "enroot_data_path", "enroot_config", "slurm_pyxis_version", "slurm_pyxis_tarball_url")
VERSION_RE = re.compile(r"^(?:\d+:)?(\d+\.\d+(?:\.\d+){0,2})(?:-[0-9A-Za-z.+~]*)?$")  # 550.127.05[-0ubuntu1]
CUDA_RE = re.compile(r"^cuda(?:-toolkit)?(?:-(\d+)-(\d+)|=(\d+)\.(\d+)\S*)$")  # cuda-toolkit-12-4, cuda=12.4.1-1
REPO_TAIL = re.compile(r"/(ubuntu\d{4}|debian\d+|rhel\d+)/(x86_64|sbsa|arm64|aarch64)/?$")
PYXIS_VERSION_RE = re.compile(r"\{\{\s*slurm_pyxis_version\s*\}\}")
SMI = "nvidia-smi --query-gpu=driver_version --format=csv,noheader"


def _key(var: str) -> str:  # the cluster.yaml key a mapped variable sets
    return MAPPED[var].split(" ")[0]


def invalid(model: type, **values: Any) -> str | None:
    """The model's complaint about these values (None: they are valid)."""
    try:
        model.model_validate(values)
    except ValidationError as exc:
        return "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
    return None


@dataclass
class NvidiaImport:
    get: Callable[[str], Var | None]  # a variable as the cluster's hosts see it
    scheduler: str
    lines: list[str] = field(default_factory=list)  # YAML under `nvidia:`
    report: Report = field(default_factory=Report)
    used: set[str] = field(default_factory=set)

    def run(self) -> NvidiaImport:
        self.driver()
        self.dcgm_and_cuda()
        if "pyxis" in SCHEDULERS[self.scheduler].carries:  # enroot and pyxis: Slurm's containers
            self.containers()
        return self

    @property
    def slurm_vars(self) -> bool:
        """DeepOps' slurm_cluster_* gates apply (the cluster.yaml carries Slurm's settings)."""
        return "slurm-conf" in SCHEDULERS[self.scheduler].carries

    def take(self, *names: str) -> dict[str, Var]:
        found = {n: v for n in names if (v := self.get(n)) is not None}
        self.used |= set(found)
        return found

    def note(self, name: str, var: Var, why: str, key: str = "") -> None:
        """Not carried; with `key`: changed on purpose (carried to key, differently)."""
        if key:
            self.report.change(var.where, name, why, key)
        else:
            self.report.note(var.where, name, why)

    def literal(self, name: str, var: Var, key: str) -> str | None:
        text = str(var.value).strip()
        if "{{" in text or "{%" in text:
            return self.note(name, var, f"a Jinja template ({text!r}), not evaluated: set {key} by hand")
        return text

    def driver(self) -> None:
        found = self.take(*DRIVER_VARS)
        gate = self.take("slurm_cluster_install_nvidia_driver").get("slurm_cluster_install_nvidia_driver") \
            if self.slurm_vars else None
        if gate is not None and not truthy(gate):
            self.note("slurm_cluster_install_nvidia_driver", gate, "false: DeepOps left the driver alone and so "
                      "does corral (nvidia.driver unset)")
            for n, v in found.items():
                self.note(n, v, "not carried: slurm_cluster_install_nvidia_driver is false (nvidia.driver unset)")
            return
        if not found:
            return self.unpinned(gate)
        lit = {n: t for n, v in found.items() if (t := self.literal(n, v, _key(n))) is not None}
        branch = next((lit[n] for n in BRANCHES if n in lit), None)
        fix = f"set nvidia.driver.version to the {branch if branch and branch.isdigit() else 'x'}.x.y you run ({SMI})"
        pv = lit.get("nvidia_driver_package_version")
        m = VERSION_RE.match(pv) if pv is not None else None
        fields, why = self.driver_fields(found, lit)  # {variable: (key, value)}, {variable: why not}
        source = dict(fields.values()).get("source", "distribution")  # DeepOps' default: Ubuntu's packages
        implied = {"source": source} | ({"kernel_modules": "proprietary"} if source == "distribution" else {})
        implied = {k: v for k, v in implied.items() if k not in dict(fields.values())}
        for n, text in why.items():
            self.note(n, found[n], text)
        if pv is not None and not m:
            self.note("nvidia_driver_package_version", found["nvidia_driver_package_version"],
                      f"{pv!r} is not an upstream driver version like 550.127.05: {fix}")
        if not m and branch and branch.isdigit() and len(branch) in (3, 4):  # the branch, resolved at plan time
            for n in (n for n in BRANCHES if n in lit and lit[n] != branch):
                self.note(n, found[n], f"{lit[n]!r} disagrees with the first branch variable: nvidia.driver.branch "
                          f"{branch} was imported", key="nvidia.driver.branch")
            return self.driver_lines({"branch": branch, **implied, **dict(fields.values())})
        if not m:
            also = f", with {', '.join(f'{k}: {v}' for k, v in implied.items())} as DeepOps installed it"
            for n in (n for n in BRANCHES if n in lit):
                self.note(n, found[n], f"{lit[n]!r} is a driver branch; corral pins the exact version: {fix}"
                          + (also if implied else ""))
            for n, (key, value) in fields.items():
                self.note(n, found[n], f"carried with the driver once nvidia.driver.version is set: add "
                          f"nvidia.driver.{key}: {value}")
            return self.unpinned(gate)
        version = m.group(1)
        for n in (n for n in BRANCHES if n in lit and lit[n] != version.split(".")[0]):
            self.note(n, found[n], f"{lit[n]!r} disagrees with nvidia_driver_package_version {pv!r}: "
                      f"nvidia.driver.version {version} was imported", key="nvidia.driver.version")
        self.driver_lines({"version": version, **implied, **dict(fields.values())})

    def driver_lines(self, values: dict[str, str]) -> None:
        self.lines.append("  driver:")
        for k, v in values.items():
            self.lines.append(f"    {k}: {json.dumps(v)}" + ("  # DeepOps' default: Ubuntu's packages (on RHEL "
                              "use cuda)" if (k, v) == ("source", "distribution") else "")
                              + ("  # resolved at plan time: the nodes' driver on it, else its newest; the run pins "
                                 "it" if k == "branch" else ""))

    def unpinned(self, gate: Var | None) -> None:
        if gate is not None:  # true (false returned earlier)
            self.note("slurm_cluster_install_nvidia_driver", gate, "true, but no exact driver version to pin: "
                      "nvidia.driver stays unset (corral leaves the installed driver alone) until you set "
                      "nvidia.driver.version")

    def driver_fields(self, found: dict[str, Var], lit: dict[str, str]) -> tuple[dict, dict[str, str]]:
        """({variable: (driver key, value)} to carry, {variable: why not} for the rest)."""
        fields: dict[str, tuple[str, str]] = {}
        why: dict[str, str] = {}
        cuda, mods = "nvidia_driver_ubuntu_install_from_cuda_repo", "nvidia_driver_ubuntu_use_open_kernel_modules"
        if cuda in lit:
            fields[cuda] = ("source", "cuda" if truthy(found[cuda]) else "distribution")
        if mods in lit:
            fields[mods] = ("kernel_modules", "open" if truthy(found[mods]) else "proprietary")
        pkg = lit.get("nvidia_driver_ubuntu_cuda_package")
        if pkg is not None and fields.get(cuda, ("", ""))[1] != "cuda":
            why["nvidia_driver_ubuntu_cuda_package"] = f"not carried: DeepOps uses it only with {cuda}: true"
        elif pkg is not None and invalid(DriverSpec, version="1.0", package=pkg):
            why["nvidia_driver_ubuntu_cuda_package"] = f"{pkg!r} is not one package name: set nvidia.driver.package"
        elif pkg is not None:
            fields["nvidia_driver_ubuntu_cuda_package"] = ("package", pkg)
        for n in ("nvidia_driver_ubuntu_cuda_repo_baseurl", "nvidia_driver_rhel_cuda_repo_baseurl"):
            url = lit.get(n)
            base = REPO_TAIL.sub("", url or "")
            bad = invalid(DriverSpec, version="1.0", repo_url=base) if url else None
            if url is None:
                continue
            if any(key == "repo_url" for key, _ in fields.values()):
                why[n] = "not carried: cluster.yaml has one nvidia.driver.repo_url (the Ubuntu base URL was used)"
            elif base == url:
                why[n] = f"{url!r} does not end in /<distro>/<arch>: set nvidia.driver.repo_url to the part before it"
            elif base.lower().startswith("http://"):
                why[n] = (f"a plain-http mirror: set nvidia.driver.repo_url: {base} and allow_http: true if you "
                          "trust it (corral refuses http downloads otherwise)")
            elif bad:
                why[n] = f"not carried ({bad}): set nvidia.driver.repo_url by hand"
            else:
                fields[n] = ("repo_url", base)
        return fields, why

    def dcgm_and_cuda(self) -> None:
        dcgm = self.take("install_dcgm").get("install_dcgm")
        if dcgm is not None and self.literal("install_dcgm", dcgm, "nvidia.dcgm.enabled") is not None:
            self.lines.append(f"  dcgm: {{enabled: {'true' if truthy(dcgm) else 'false'}}}")
        found = self.take("cuda_version", *(("slurm_cluster_install_cuda",) if self.slurm_vars else ()))
        gate, ver = found.get("slurm_cluster_install_cuda"), found.get("cuda_version")
        fix = "set nvidia.cuda_toolkit.version to the major.minor you run (nvcc --version)"
        if gate is not None and not truthy(gate):
            self.note("slurm_cluster_install_cuda", gate, "false: DeepOps installed no CUDA toolkit and neither "
                      "does corral (nvidia.cuda_toolkit unset)")
            if ver is not None:
                self.note("cuda_version", ver, "not carried: slurm_cluster_install_cuda is false")
            return
        text = self.literal("cuda_version", ver, "nvidia.cuda_toolkit.version") if ver is not None else None
        m = CUDA_RE.match(text or "")
        if m:
            major, minor = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            self.lines.append(f'  cuda_toolkit: {{version: "{major}.{minor}"}}')
        elif text is not None:
            self.note("cuda_version", ver, f"{text!r} gives no CUDA version (DeepOps then installs the newest); "
                      f"corral pins one: {fix}")
        elif gate is not None and ver is None:
            self.note("slurm_cluster_install_cuda", gate, "true, but cuda_version is unset (DeepOps installed the "
                      f"newest CUDA toolkit); corral pins one: {fix}")

    def containers(self) -> None:
        found = self.take("slurm_install_enroot", "slurm_install_pyxis", *CONTAINER_VARS)
        off = [n for n in ("slurm_install_enroot", "slurm_install_pyxis") if n in found and not truthy(found[n])]
        if off:  # playbooks/container/pyxis.yml runs only when both are true
            for n in off:
                self.note(n, found[n], "false: DeepOps installs enroot and pyxis only together (both true), so "
                          "neither was installed; nvidia.enroot and nvidia.pyxis stay unset")
            for n in CONTAINER_VARS:
                if n in found:
                    self.note(n, found[n], f"not carried: no enroot/pyxis installed ({' and '.join(off)} false)")
            return
        if "slurm_pyxis_tarball_url" in found:  # DeepOps' own form: .../v{{ slurm_pyxis_version }}.tar.gz
            v = found["slurm_pyxis_tarball_url"]
            found["slurm_pyxis_tarball_url"] = Var(PYXIS_VERSION_RE.sub("{version}", str(v.value)), v.where)
        lit = {n: str(found[n].value) if n == "enroot_config" else self.literal(n, found[n], _key(n))
               for n in CONTAINER_VARS if n in found}  # enroot_config's templates are read line by line
        lit = {n: t for n, t in lit.items() if t is not None}
        enroot = self.version("enroot_version", found, lit, DEEPOPS_ENROOT, EnrootSpec)
        if enroot is None:
            for n in CONTAINER_VARS[1:]:
                if n in found:
                    self.note(n, found[n], "not carried: no nvidia.enroot without its version (nor nvidia.pyxis, "
                              "which needs it)")
            return
        e: dict[str, Any] = {"version": enroot}
        if "enroot_release" in lit and lit["enroot_release"] != "1":
            e["url"] = EnrootSpec.model_fields["url"].default.replace("-1_", f"-{lit['enroot_release']}_")
        if "enroot_packages" in found:
            pk = found["enroot_packages"].value
            if isinstance(pk, list) and all(isinstance(x, str) and "{{" not in x for x in pk):
                e["packages"] = list(pk)
            else:
                self.note("enroot_packages", found["enroot_packages"], "not a list of package names: set "
                          "nvidia.enroot.packages by hand")
        for n in ("enroot_runtime_path", "enroot_cache_path", "enroot_data_path"):
            if n in lit:
                e[n.removeprefix("enroot_")] = lit[n]
        if "enroot_config" in lit:
            e["settings"] = self.enroot_settings(found["enroot_config"], lit["enroot_config"], e)
        for key in [k for k in e if k != "version"]:
            bad = invalid(EnrootSpec, version=enroot, **{key: e[key]})
            name = next((n for n in CONTAINER_VARS if n in found and _key(n).endswith("." + key)),
                        "enroot_config")  # a path from enroot_config was checked there
            if bad:
                self.note(name, found[name], f"not carried ({bad}): set nvidia.enroot.{key} by hand")
                del e[key]
        pyxis = self.version("slurm_pyxis_version", found, lit, DEEPOPS_PYXIS, PyxisSpec)
        p: dict[str, Any] = {"version": pyxis}
        url = lit.get("slurm_pyxis_tarball_url")
        if url is not None and pyxis is None:
            self.note("slurm_pyxis_tarball_url", found["slurm_pyxis_tarball_url"], "not carried: no nvidia.pyxis "
                      "without its version")
        elif url is not None:
            bad = invalid(PyxisSpec, version=pyxis, url=url)
            if bad:
                self.note("slurm_pyxis_tarball_url", found["slurm_pyxis_tarball_url"],
                          f"not carried ({bad}): set nvidia.pyxis.url by hand")
            else:
                p["url"] = url
        self.lines += ["  enroot:"] + [f"    {k}: {json.dumps(v)}" for k, v in e.items()] + \
            ['    sha256: "skip"  # imported unchecked: pin it (see the list above)']
        if pyxis is not None:
            self.lines += ["  pyxis:"] + [f"    {k}: {json.dumps(v)}" for k, v in p.items()] + \
                ['    sha256: "skip"  # imported unchecked: pin it (see the list above)']
        sums = ", ".join(f"{x}: <sha256>" for x in e.get("packages", EnrootSpec.model_fields["packages"].default))
        pins = [f"nvidia.enroot.sha256: {{{sums}}}"]
        pins += ["nvidia.pyxis.sha256: <sha256>"] if pyxis is not None else []
        gate = found.get("slurm_install_enroot")
        self.report.note(gate.where if gate else "", f"nvidia.enroot.sha256{', nvidia.pyxis.sha256' if pyxis else ''}",
                         "WARNING: imported as `skip` (DeepOps checks no download), so corral installs these as "
                         f"root unchecked; pin them: {' and '.join(pins)} (sha256sum of each download)")
        defaults = [f"nvidia.{k}.version {v}" for k, n, v in (("enroot", "enroot_version", DEEPOPS_ENROOT),
                                                              ("pyxis", "slurm_pyxis_version", DEEPOPS_PYXIS))
                    if n not in found and v in (enroot, pyxis)]
        if defaults:
            self.report.add(MAPPED_GROUP, gate.where if gate else "", ", ".join(defaults), "DeepOps' defaults, "
                            "imported (the variable is unset); newer releases are in docs/components/containers.md")

    def version(self, name: str, found: dict[str, Var], lit: dict[str, str], default: str,
                model: type) -> str | None:
        if name not in found:
            return default
        text = lit.get(name)
        bad = invalid(model, version=text) if text is not None else "a template"
        if bad:
            if text is not None:
                self.note(name, found[name], f"{text!r} is not a version x.y.z: set {_key(name)} by hand")
            return None
        return text

    def enroot_settings(self, var: Var, text: str, e: dict[str, Any]) -> dict[str, str]:
        """enroot.conf lines ("ENROOT_X value") -> settings; the *_PATH lines -> the paths."""
        settings, left = {}, []
        for line in (raw.strip() for raw in text.splitlines()):
            key, value = (re.split(r"\s+|=", line, maxsplit=1) + [""])[:2]
            value = value.strip()
            path = {"ENROOT_RUNTIME_PATH": "runtime_path", "ENROOT_CACHE_PATH": "cache_path",
                    "ENROOT_DATA_PATH": "data_path"}.get(key)
            if not line or line.startswith("#") or (path and ("{{" in value or path in e)):
                continue  # enroot_*_path, carried on their own, win over the line
            if path and not invalid(EnrootSpec, version="1.0.0", **{path: value}):
                e[path] = value
            elif not path and not invalid(EnrootSpec, version="1.0.0", settings={key: value}):
                settings[key] = value
            else:
                left.append(line)
        if left:
            self.note("enroot_config", var, f"lines not carried ({'; '.join(left)}): nvidia.enroot.settings holds "
                      "ENROOT_* lines without $, quotes or backslashes; the paths are runtime_path, cache_path, "
                      "data_path")
        return settings

