"""`gpus.model` checked against the models corral knows (spec/gpus.py, and the MIG table of spec/mig.py): a
model of valid form that corral does not know is most often a typo (`hl00`), which would reach slurm.conf as
a GRES type no GPU reports. Refused with the close known models, located at the key; `model_unknown_ok: true`
on the gpus allows one (a GPU newer than corral's table), then warned about. Pure: no I/O."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from corral.errors import Problem
from corral.spec.gpus import GPU_MODELS
from corral.spec.mig import MIG_PROFILES

if TYPE_CHECKING:
    from corral.spec.cluster import Cluster

Where = Callable[..., str]


def known_models() -> list[str]:
    return sorted({*GPU_MODELS, *MIG_PROFILES})


def _models(cluster: Cluster) -> Iterator[tuple[tuple, str, bool]]:
    """(the key's location, the model, model_unknown_ok) of every gpus.model the spec writes."""
    for gi, group in enumerate(cluster.spec.nodes):
        ok = bool(group.gpus and group.gpus.model_unknown_ok)
        if group.gpus is not None:
            yield ("nodes", gi, "gpus", "model"), group.gpus.model, ok
        for name, o in group.overrides.items():
            if o.gpus is not None and o.gpus.model is not None:
                own = o.gpus.model_unknown_ok
                yield ("nodes", gi, "overrides", name, "gpus", "model"), o.gpus.model, ok if own is None else own


_LOOKALIKE = str.maketrans("lioO", "1100")  # hl00 is h100 typed with a letter l


def _close(model: str, known: list[str]) -> list[str]:
    """The known models close to a mistyped one, closest first: the one it is with look-alike characters
    (l/i for 1, o for 0) alone, else difflib's (ties in name order)."""
    alike = model.translate(_LOOKALIKE)
    if alike in known:
        return [alike]
    close = difflib.get_close_matches(model, known, n=3, cutoff=0.5)
    return sorted(close, key=lambda c: (-difflib.SequenceMatcher(None, model, c).ratio(), c))


def check_gpu_models(cluster: Cluster, where: Where) -> list[Problem]:
    known, problems = known_models(), []
    for loc, model, ok in _models(cluster):
        if model in known or ok:
            continue
        close = _close(model, known)
        hint = f"did you mean {' or '.join(close)}? " if close else f"known: {', '.join(known)}; "
        problems.append(Problem(where(loc), "GPU model corral does not know", model,
                                f"{hint}a model newer than corral's table: add model_unknown_ok: true to these gpus"))
    return problems


def gpu_model_warnings(cluster: Cluster) -> list[str]:
    known = known_models()
    seen = dict.fromkeys(m for _, m, ok in _models(cluster) if ok and m not in known)
    return [f"gpus.model {m!r} is not a GPU model corral knows (model_unknown_ok): Gres=gpu:{m} must be the type "
            "the nodes' GPUs report; no generation Feature, burn floor or MIG profiles for it" for m in seen]
