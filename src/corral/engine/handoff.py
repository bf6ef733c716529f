"""What a deploy op hands to a rollout that runs after the components: a typed marker on the op's
result (engine/notes.py `annotate(rollout=...)`), read by workflows/node_rollout.py `pending()`.

The disruption label and the diff stay text for people (plan shows them); no rollout reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

DRIVER = "driver"          # deploy/nvidia_driver.py: a driver version to install and reboot into
MIG = "mig"                # deploy/mig.py: a MIG layout to apply
PACKAGES = "packages"      # deploy/upgrades.py: OS package upgrades
SLURM = "slurm"            # deploy/slurm_version.py: slurm.version differs from what the node runs
KUBERNETES = "kubernetes"  # deploy/kubernetes.py: kubeadm/kubelet/kubectl to another version
K8S_JOIN = "k8s join"      # deploy/kubernetes.py: a node to join the Kubernetes cluster


@dataclass(frozen=True)
class Handoff:
    """A change left for the rollout of `kind`: from version `old` to `new` where it has versions."""
    kind: str
    old: str | None = None
    new: str | None = None

    @classmethod
    def of(cls, value) -> "Handoff | None":
        """From a result read back as JSON (fanout's CORRAL-RESULT lines) or already typed."""
        return cls(**value) if isinstance(value, dict) else value
