"""virtual/image.py: the packages of a tree read from its dpkg status (what apply_updates asks apt to
upgrade), the release's status kept for bundles, and a recipe that says the image carries the release's
updates (a new recipe, a new image)."""

from __future__ import annotations

from corral.virtual import image


def test_installed_reads_only_installed_packages(tmp_path):
    status = tmp_path / "var/lib/dpkg/status"
    status.parent.mkdir(parents=True)
    status.write_text("Package: perl-base\nStatus: install ok installed\nVersion: 5.36.0-7+deb12u3\n\n"
                      "Package: gone\nStatus: deinstall ok config-files\nVersion: 1\n\n"
                      "Package: systemd\nStatus: install ok installed\nVersion: 252.30-1~deb12u2\n")
    assert image.installed(tmp_path) == ["perl-base", "systemd"]


def test_the_recipe_names_the_updates():
    assert image.recipe()["updated"] is True and image.recipe()["version"] >= 6


def test_bundles_resolve_against_the_release_as_it_shipped(tmp_path):
    """An image built before the updates has only dpkg's status; one built with them keeps the release's."""
    dpkg = tmp_path / "var/lib/dpkg/status"
    dpkg.parent.mkdir(parents=True)
    dpkg.write_text("updated\n")
    assert image.release_status(tmp_path) == dpkg
    kept = tmp_path / image.RELEASE_STATUS
    kept.parent.mkdir(parents=True)
    kept.write_text("as shipped\n")
    assert image.release_status(tmp_path) == kept
