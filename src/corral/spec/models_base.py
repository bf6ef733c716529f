"""The base of every spec model: unknown keys are errors, models are frozen."""

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, StringConstraints

from corral.spec.types import _url

# a path on the control host written into ssh_config: no whitespace, quotes or controls; ~ only as ~/
LOCAL_PATH = r"^(~/|[^~\s\x00-\x1f\x7f-\x9f\"'\\])[^\s\x00-\x1f\x7f-\x9f\"'\\]*$"

GPU_MODEL = r"^[a-z0-9][a-z0-9_.-]*$"  # a GPU model as the spec names it: the GRES type (h100, a100, ...)
Sums = dict[str, str] | Literal["skip"]  # package -> sha256 of its download, or "skip" (warned about)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def check_sums(sums: Sums) -> Sums:
    """package -> sha256 of its download: 64 lowercase hex digits each (or the word "skip")."""
    if sums == "skip":
        return sums
    for name, digest in sums.items():
        if not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise ValueError(f"sha256 of {name!r} must be 64 lowercase hex digits")
    return sums


def check_url_template(url: str, *names: str) -> str:
    """A download URL template may use only {name} placeholders of `names` (spec/types.py checks the rest)."""
    try:
        url.format(**{n: "x" for n in names})
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"the URL may use only {', '.join('{' + n + '}' for n in names)} ({exc})") from None
    return _url(url, names)


URL_PATTERN = r"^https?://[^\s]+$"
# a source tarball's URL template ({version}) and a release's .deb URL template ({version}, {package}, {arch})
SourceUrl = Annotated[str, StringConstraints(pattern=URL_PATTERN),
                      AfterValidator(lambda v: check_url_template(v, "version"))]
DebUrl = Annotated[str, StringConstraints(pattern=URL_PATTERN),
                   AfterValidator(lambda v: check_url_template(v, "version", "package", "arch"))]
