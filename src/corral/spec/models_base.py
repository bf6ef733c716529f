"""The base of every spec model: unknown keys are errors, models are frozen."""

import re

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def check_sums(sums: dict[str, str]) -> dict[str, str]:
    """package -> sha256 of its download: 64 lowercase hex digits each."""
    for name, digest in sums.items():
        if not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise ValueError(f"sha256 of {name!r} must be 64 lowercase hex digits")
    return sums


def check_url_template(url: str, *names: str) -> str:
    """A download URL template may use only {name} placeholders of `names`."""
    try:
        url.format(**{n: "x" for n in names})
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"the URL may use only {', '.join('{' + n + '}' for n in names)} ({exc})") from None
    return url
