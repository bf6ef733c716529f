"""virtual/image.py: the packages of a tree read from its dpkg status (what apply_updates asks apt to
upgrade), and a recipe that says the image carries the release's updates (a new recipe, a new image)."""

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
    assert image.recipe()["updated"] is True and image.recipe()["version"] >= 5
