"""PCI device ids of NVIDIA GPUs, NVSwitches and NVIDIA/Mellanox ConnectX HCAs (data).

Sources (see tests/fixtures/gpu/README.md):
- ids and chip names: the PCI ID database (github.com/pciutils/pciids, pci.ids version 2026.08.22),
  vendor 10de (NVIDIA) and 15b3 (Mellanox Technologies);
- product names: the "Compatible GPUs" table of NVIDIA's open-gpu-kernel-modules README (the names
  nvidia-smi prints); where that table has no row (Volta, some PCIe SKUs) the pci.ids bracket name;
- cross-checked with NVIDIA/gpu-admin-tools gpu/devid_names.py and the `Device Id` field of
  published `nvidia-smi -q` captures (0x2330 H100 80GB HBM3, 0x2321 H100 NVL, 0x26B9 L40S, 0x27B8 L4).

The model key is the GRES type (`gpus.model` in the spec, corral.spec.gpus.GPU_MODELS); a key that
is not in GPU_MODELS (a30, a40, l40, gh200 ...) is still a valid GRES type, it just has no spec data.
"""

from __future__ import annotations

from typing import NamedTuple

NVIDIA_VENDOR = 0x10DE
MELLANOX_VENDOR = 0x15B3

CLASS_VGA = 0x0300          # display controller, VGA compatible
CLASS_3D = 0x0302           # 3D controller (datacenter GPUs)
CLASS_BRIDGE_OTHER = 0x0680  # "Bridge": how NVSwitches enumerate
CLASS_INFINIBAND = 0x0207
CLASS_ETHERNET = 0x0200


class PciModel(NamedTuple):
    model: str       # GRES type / family key
    name: str        # product name
    generation: str  # architecture generation (GPUs) or NVSwitch / ConnectX family


def _gpu(model: str, name: str, gen: str) -> PciModel:
    return PciModel(model, name, gen)


NVIDIA_GPUS: dict[int, PciModel] = {
    # Volta (GV100): names from pci.ids, except the two nvidia-smi names seen in captures
    0x1DB1: _gpu("v100", "Tesla V100 SXM2 16GB", "volta"),
    0x1DB4: _gpu("v100", "Tesla V100 PCIe 16GB", "volta"),
    0x1DB5: _gpu("v100", "Tesla V100-SXM2-32GB", "volta"),
    0x1DB6: _gpu("v100", "Tesla V100-PCIE-32GB", "volta"),
    0x1DB8: _gpu("v100", "Tesla V100 SXM3 32GB", "volta"),
    0x1DF6: _gpu("v100", "Tesla V100S PCIe 32GB", "volta"),
    # Turing
    0x1EB8: _gpu("t4", "Tesla T4", "turing"),
    # Ampere
    0x20B0: _gpu("a100", "NVIDIA A100-SXM4-40GB", "ampere"),
    0x20B1: _gpu("a100", "A100 PCIe 40GB", "ampere"),
    0x20B2: _gpu("a100", "NVIDIA A100-SXM4-80GB", "ampere"),
    0x20B5: _gpu("a100", "NVIDIA A100 80GB PCIe", "ampere"),
    0x20F1: _gpu("a100", "NVIDIA A100-PCIE-40GB", "ampere"),
    0x20B7: _gpu("a30", "NVIDIA A30", "ampere"),
    0x2235: _gpu("a40", "NVIDIA A40", "ampere"),
    0x2236: _gpu("a10", "NVIDIA A10", "ampere"),
    0x2237: _gpu("a10g", "NVIDIA A10G", "ampere"),
    # Ada
    0x27B8: _gpu("l4", "NVIDIA L4", "ada"),
    0x26B5: _gpu("l40", "NVIDIA L40", "ada"),
    0x26B9: _gpu("l40s", "NVIDIA L40S", "ada"),
    # Hopper
    0x2330: _gpu("h100", "NVIDIA H100 80GB HBM3", "hopper"),   # SXM5
    0x2331: _gpu("h100", "NVIDIA H100 PCIe", "hopper"),
    0x2321: _gpu("h100", "NVIDIA H100 NVL", "hopper"),
    0x2339: _gpu("h100", "NVIDIA H100", "hopper"),             # pci.ids: H100 SXM5 94GB
    0x2322: _gpu("h800", "NVIDIA H800 PCIe", "hopper"),
    0x2324: _gpu("h800", "NVIDIA H800", "hopper"),
    0x2335: _gpu("h200", "NVIDIA H200", "hopper"),             # SXM 141GB
    0x233B: _gpu("h200", "NVIDIA H200 NVL", "hopper"),
    0x2342: _gpu("gh200", "NVIDIA GH200 120GB", "hopper"),
    0x2348: _gpu("gh200", "NVIDIA GH200 144G HBM3e", "hopper"),
    # Blackwell
    0x2901: _gpu("b200", "NVIDIA B200", "blackwell"),
    0x2909: _gpu("b200", "NVIDIA B200", "blackwell"),          # pci.ids: HGX B200 168GB
    0x2941: _gpu("gb200", "NVIDIA GB200", "blackwell"),
    0x3182: _gpu("b300", "NVIDIA B300 SXM6 AC", "blackwell"),
}

NVIDIA_NVSWITCHES: dict[int, PciModel] = {
    0x1AF1: PciModel("nvswitch", "A100 NVSwitch", "ampere"),  # DGX/HGX A100 (3rd-gen NVLink)
    0x22A3: PciModel("nvswitch", "H100 NVSwitch", "hopper"),  # DGX/HGX H100/H200
}

MELLANOX_HCAS: dict[int, PciModel] = {
    0x1013: PciModel("connectx-4", "MT27700 Family [ConnectX-4]", "connectx-4"),
    0x1015: PciModel("connectx-4-lx", "MT27710 Family [ConnectX-4 Lx]", "connectx-4"),
    0x1017: PciModel("connectx-5", "MT27800 Family [ConnectX-5]", "connectx-5"),
    0x1018: PciModel("connectx-5-vf", "MT27800 Family [ConnectX-5 Virtual Function]", "connectx-5"),
    0x1019: PciModel("connectx-5-ex", "MT28800 Family [ConnectX-5 Ex]", "connectx-5"),
    0x101B: PciModel("connectx-6", "MT28908 Family [ConnectX-6]", "connectx-6"),
    0x101C: PciModel("connectx-6-vf", "MT28908 Family [ConnectX-6 Virtual Function]", "connectx-6"),
    0x101D: PciModel("connectx-6-dx", "MT2892 Family [ConnectX-6 Dx]", "connectx-6"),
    0x101E: PciModel("connectx-vf", "ConnectX Family mlx5Gen Virtual Function", "connectx"),
    0x101F: PciModel("connectx-6-lx", "MT2894 Family [ConnectX-6 Lx]", "connectx-6"),
    0x1021: PciModel("connectx-7", "MT2910 Family [ConnectX-7]", "connectx-7"),
    0x1023: PciModel("connectx-8", "CX8 Family [ConnectX-8]", "connectx-8"),
    0x1025: PciModel("connectx-9", "CX9 Family [ConnectX-9]", "connectx-9"),
    0xA2D6: PciModel("bluefield-2", "MT42822 BlueField-2 integrated ConnectX-6 Dx network controller",
                     "connectx-6"),
    0xA2DC: PciModel("bluefield-3", "MT43244 BlueField-3 integrated ConnectX-7 network controller",
                     "connectx-7"),
}


def nvidia_gpu(device: int) -> PciModel | None:
    return NVIDIA_GPUS.get(device)
