"""DeepOps' Slurm settings besides roles -> cluster.yaml's `slurm:`: the version, DeepOps' one partition
`batch` (MaxTime, DefaultTime), NVML autodetection and, with HA, the StateSaveLocation.

The version, changed on purpose: DeepOps compiles Slurm from source on every node (slurm_version,
26.05.1 by default); corral installs the distribution's packages (slurm-wlm) and pins them with
slurm.version. A version whose major release corral knows (spec/slurm_releases.py) is imported as that
major release (any maintenance release the nodes' apt sources carry); a newer one is not carried, and
corral installs the distribution's own release (Debian 12: 22.05, Ubuntu 24.04: 23.11) unpinned. Either
way the report says so, with the check to make before the first apply."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from corral.importers.deepops_inventory import Var
from corral.importers.deepops_report import Report
from corral.importers.deepops_vars import truthy
from corral.spec.models_slurm import SLURM_TIME
from corral.spec.slurm_releases import RELEASES

VERSION_RE = re.compile(r"^(\d{2})\.(\d{2})(?:\.\d{1,3})?(?:-[0-9A-Za-z.]+)?$")  # 24.05.4, 24.05.4-1
APT_CHECK = "`apt-cache policy slurmd` on a node"
DEEPOPS_STATE = "/var/spool/slurm/ctld"  # roles/slurm/templates/etc/slurm/slurm.conf without slurm_enable_ha


def version_line(var: Var, report: Report) -> str | None:
    """`slurm.version`'s YAML line for DeepOps' slurm_version (None: not carried, noted)."""
    text = str(var.value).strip()
    m = VERSION_RE.match(text)
    if not m:
        report.note(var.where, "slurm_version", f"{text!r} is not a Slurm version like 24.05.4: corral installs the "
                    f"distribution's Slurm, unpinned; set slurm.version to pin a release ({APT_CHECK})")
        return None
    major = f"{m.group(1)}.{m.group(2)}"
    if major not in RELEASES:
        report.note(var.where, "slurm_version", f"{text}: Slurm {major} is not a release corral knows (the newest is "
                    f"{RELEASES[-1]}), and corral installs Slurm from the distribution's packages, never from "
                    "source: slurm.version stays unset, so the nodes get their distribution's release (Debian 12: "
                    f"22.05, Ubuntu 24.04: 23.11). DeepOps' state and database need {major} or later: install "
                    "packages of that release in the nodes' apt sources first (docs/migrating-from-deepops.md)")
        return None
    report.change(var.where, "slurm_version", f"DeepOps built {text} from source; corral installs the "
                  f"distribution's packages pinned to {major} (any {major}.x the nodes' apt sources carry: check "
                  f"{APT_CHECK} before the first apply)", "slurm.version")
    return f"  version: {json.dumps(major)}  # slurm_version {text}"


def slurm_lines(get: Callable[[str], Var | None], report: Report, used: set[str], state: str | None) -> list[str]:
    """YAML under `slurm:` (the max time was checked by the caller)."""
    found = {n: v for n in ("slurm_version", "slurm_max_job_timelimit", "slurm_default_job_timelimit",
                            "slurm_autodetect_nvml") if (v := get(n)) is not None}
    used |= set(found)
    body = []
    if "slurm_version" in found and (line := version_line(found["slurm_version"], report)):
        body.append(line)
    limit = str(found["slurm_max_job_timelimit"].value) if "slurm_max_job_timelimit" in found else "INFINITE"
    body += ["  partitions:  # DeepOps' one partition", '    - name: "batch"', "      default: true",
             f"      max_time: {json.dumps(limit)}"]
    default = found.get("slurm_default_job_timelimit")
    text = str(default.value).strip() if default is not None else ""
    if default is not None and text and re.match(SLURM_TIME, text):
        body.append(f"      extra: {{DefaultTime: {json.dumps(text)}}}  # slurm_default_job_timelimit")
    elif default is not None and text and text != "None":
        report.note(default.where, "slurm_default_job_timelimit", f"{text!r} is not a Slurm time: set "
                    "slurm.partitions[batch].extra.DefaultTime")
    if truthy(found.get("slurm_autodetect_nvml"), False):
        body.append("  gres_autodetect: nvml  # slurm_autodetect_nvml")
    if state is not None:
        body.append(f"  state_save_location: {json.dumps(state)}  # slurm_ha_state_save_location")
    else:  # not a variable: DeepOps' slurm.conf template without HA
        report.note("", "StateSaveLocation", f"DeepOps kept slurmctld's state in {DEEPOPS_STATE}; corral's is "
                    "slurm.state_save_location (default /var/lib/slurm/slurmctld): copy the state there during the "
                    "move, or set it to DeepOps' directory (docs/migrating-from-deepops.md)")
    return body
