"""Files pinned by sha256, fetched from the package registry's simple index (PEP 503) and never run: for lists
that hold source archives (EasyBuild's sdists), where `pip download` would build each one's metadata, running
its build backend and fetching that backend unpinned. Here the index page of each name is read, the one file
whose sha256 fragment is the pinned hash is downloaded, and its bytes are checked against the pin before it
is kept (a file that differs is refused and removed). Bounded per request and in all."""

from __future__ import annotations

import hashlib
import html.parser
import os
import time
import urllib.parse
import urllib.request
from pathlib import Path

INDEX = os.environ.get("CORRAL_PYPI_INDEX", "https://pypi.org/simple")
REQUEST_TIMEOUT_S = 60


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        if tag == "a":
            self.hrefs += [v for k, v in attrs if k == "href" and v]


def links(page: str, base: str) -> dict[str, str]:
    """sha256 -> absolute URL of every file an index page lists with a `#sha256=` fragment."""
    parser = _Links()
    parser.feed(page)
    out = {}
    for href in parser.hrefs:
        url, _, frag = href.partition("#")
        if frag.startswith("sha256="):
            out[frag.removeprefix("sha256=").lower()] = urllib.parse.urljoin(base, url)
    return out


def _get(url: str, deadline: float) -> bytes:
    if time.monotonic() > deadline:
        raise TimeoutError("not done in time")
    with urllib.request.urlopen(url, timeout=REQUEST_TIMEOUT_S) as resp:  # noqa: S310 - https index
        return resp.read()


def fetch(want: dict[str, tuple[str, str]], d: Path, timeout: float, index: str = INDEX) -> list[str]:
    """Each pinned (name -> (version, sha256)) file into `d` under its index file name; the problems (empty:
    all there, each checked)."""
    deadline, problems = time.monotonic() + timeout, []
    for name, (version, sha) in sorted(want.items()):
        page_url = f"{index.rstrip('/')}/{name}/"
        try:
            found = links(_get(page_url, deadline).decode("utf-8", "replace"), page_url).get(sha)
            if found is None:
                problems.append(f"{name}=={version}: no file with the pinned sha256 on {page_url}")
                continue
            file_name = Path(urllib.parse.urlparse(found).path).name
            if not file_name or file_name.startswith(".") or "/" in file_name:
                problems.append(f"{name}=={version}: the index names no usable file ({found[:120]})")
                continue
            data = _get(found, deadline)
        except (OSError, ValueError) as exc:
            problems.append(f"{name}=={version}: {exc}")
            continue
        if hashlib.sha256(data).hexdigest() != sha:
            problems.append(f"{name}=={version}: {file_name} differs from its pinned sha256; not kept")
            continue
        (d / file_name).write_bytes(data)
    return problems
