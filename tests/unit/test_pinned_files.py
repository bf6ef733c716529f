"""pinned_files: a file is fetched by the sha256 its list pins, found on the registry's simple index page and
checked before it is kept; nothing is built or run. The index and the downloads are played by a dict (pure
logic); the real registry is reached by the workbench's venv fetch on the virtual cluster's control host."""

from __future__ import annotations

import hashlib

from corral import pinned_files

GOOD = b"the sdist's bytes"
SHA = hashlib.sha256(GOOD).hexdigest()
PAGE = ('<html><body><a href="../../files/pkg-1.0.tar.gz#sha256=' + SHA + '">pkg-1.0.tar.gz</a>'
        '<a href="https://files.example/other-0.9.tar.gz#sha256=' + "0" * 64 + '">other</a>'
        '<a href="no-hash.tar.gz">x</a></body></html>')


def _serve(monkeypatch, answers: dict[str, bytes]) -> list[str]:
    asked = []

    def get(url, deadline):
        asked.append(url)
        if url not in answers:
            raise OSError(f"HTTP 404 for {url}")
        return answers[url]
    monkeypatch.setattr(pinned_files, "_get", get)
    return asked


def test_links_resolve_relative_urls_and_keep_only_hashed_files():
    found = pinned_files.links(PAGE, "https://pypi.example/simple/pkg/")
    assert found == {SHA: "https://pypi.example/files/pkg-1.0.tar.gz",
                     "0" * 64: "https://files.example/other-0.9.tar.gz"}


def test_the_pinned_file_is_fetched_checked_and_kept(tmp_path, monkeypatch):
    asked = _serve(monkeypatch, {"https://pypi.example/simple/pkg/": PAGE.encode(),
                                 "https://pypi.example/files/pkg-1.0.tar.gz": GOOD})
    assert pinned_files.fetch({"pkg": ("1.0", SHA)}, tmp_path, 60, "https://pypi.example/simple") == []
    assert (tmp_path / "pkg-1.0.tar.gz").read_bytes() == GOOD
    assert asked == ["https://pypi.example/simple/pkg/", "https://pypi.example/files/pkg-1.0.tar.gz"]


def test_a_file_that_differs_from_its_pin_is_refused_and_not_kept(tmp_path, monkeypatch):
    _serve(monkeypatch, {"https://pypi.example/simple/pkg/": PAGE.encode(),
                         "https://pypi.example/files/pkg-1.0.tar.gz": b"something else"})
    problems = pinned_files.fetch({"pkg": ("1.0", SHA)}, tmp_path, 60, "https://pypi.example/simple")
    assert problems == ["pkg==1.0: pkg-1.0.tar.gz differs from its pinned sha256; not kept"]
    assert not any(tmp_path.iterdir())


def test_no_file_with_the_pin_and_an_unreachable_index_are_named(tmp_path, monkeypatch):
    _serve(monkeypatch, {"https://pypi.example/simple/pkg/": PAGE.encode()})
    problems = pinned_files.fetch({"pkg": ("1.0", "f" * 64), "gone": ("2.0", SHA)}, tmp_path, 60,
                                  "https://pypi.example/simple")
    assert problems == ["gone==2.0: HTTP 404 for https://pypi.example/simple/gone/",
                        "pkg==1.0: no file with the pinned sha256 on https://pypi.example/simple/pkg/"]
    assert not any(tmp_path.iterdir())
