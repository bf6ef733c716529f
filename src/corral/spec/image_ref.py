"""A container image reference, `[registry[:port]/]path[:tag][@sha256:digest]`, parsed by the grammar of
distribution's reference package (github.com/distribution/reference, regexp.go), pure.

What it accepts: a registry (`domain-component(.domain-component)*[:port]`, the first part when it has
a dot or a port or is `localhost`; otherwise `docker.io`, and a one-part path gets `library/` as docker
does), path components `[a-z0-9]+` joined by `.`, `_`, `__` or dashes, a tag `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`,
a digest `sha256:` + 64 lowercase hex, a name of at most 255 characters. Everything else is refused
with a message naming the bad part (shell characters, spaces, uppercase in the path, empty parts, a
short digest). Not accepted: bracketed IPv6 registries and digests of other algorithms.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from corral.errors import UsageError

_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
DOMAIN = re.compile(rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*(?::[0-9]+)?")
PATH_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
NAME_MAX = 255
_SAFE = re.compile(r"[A-Za-z0-9._:/@-]")


@dataclass(frozen=True)
class ImageRef:
    registry: str
    path: str
    tag: str | None = None
    digest: str | None = None

    def __str__(self) -> str:
        return f"{self.registry}/{self.path}" + (f":{self.tag}" if self.tag else "") + \
            (f"@{self.digest}" if self.digest else "")

    @property
    def file_name(self) -> str:
        """The image's name on shared storage, as enroot names its imports: `nvidia+pytorch+24.01-py3`
        (the path's parts and the tag joined by `+`; a digest-only reference: `sha256-<12 hex>`)."""
        last = self.tag or (self.digest.replace(":", "-")[:19] if self.digest else "latest")
        return "+".join([*self.path.split("/"), last])


def _bad(text: str, why: str, fix: str = "an image reference like nvcr.io/nvidia/pytorch:24.01-py3") -> UsageError:
    return UsageError(f"image reference: {why}", value=text, fix=fix)


def parse(text: str) -> ImageRef:
    """`text` as an ImageRef, or a UsageError naming the bad part."""
    if not isinstance(text, str) or not text:
        raise _bad(str(text), "empty")
    odd = sorted({c for c in text if not _SAFE.fullmatch(c)})
    if odd:
        shown = " ".join(repr(c) for c in odd[:5])
        raise _bad(text, f"characters no image reference holds: {shown} (spaces, quotes and shell characters "
                         "are refused)")
    rest, digest = text, None
    if "@" in rest:
        rest, _, digest = rest.partition("@")
        if not DIGEST.fullmatch(digest):
            raise _bad(text, f"digest {digest!r} is not sha256: and 64 lowercase hex digits")
    tag = None
    slash = rest.rfind("/")
    if ":" in rest[slash + 1:]:
        rest, _, tag = rest.rpartition(":")
        if not TAG.fullmatch(tag):
            raise _bad(text, f"tag {tag!r} is not 1-128 of letters, digits, '_', '.', '-' (not starting with '.' "
                             "or '-')")
    parts = rest.split("/")
    registry = "docker.io"
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        registry = parts.pop(0)
        if not DOMAIN.fullmatch(registry) or (":" in registry and not 0 < int(registry.rsplit(":", 1)[1]) < 65536):
            raise _bad(text, f"registry {registry!r} is not host[:port] (DNS name or address, port 1-65535)")
    for part in parts:
        if not part:
            raise _bad(text, "an empty part of the path (a leading, trailing or doubled '/')")
        if not PATH_COMPONENT.fullmatch(part):
            why = "uppercase letters" if part.lower() != part else "not lowercase letters and digits joined by " \
                                                                   "'.', '_', '__' or '-'"
            raise _bad(text, f"path component {part!r}: {why}")
    if registry == "docker.io" and len(parts) == 1:
        parts.insert(0, "library")
    path = "/".join(parts)
    if len(registry) + 1 + len(path) > NAME_MAX:
        raise _bad(text, f"name longer than {NAME_MAX} characters")
    return ImageRef(registry, path, tag if tag or digest else "latest", digest)
