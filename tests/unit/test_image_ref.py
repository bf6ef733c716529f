"""spec/image_ref.py: distribution's reference grammar, and hostile strings refused with the bad part named."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.errors import UsageError
from corral.spec.image_ref import ImageRef, parse


@pytest.mark.parametrize("text,want", [
    ("nvcr.io/nvidia/pytorch:24.01-py3", ImageRef("nvcr.io", "nvidia/pytorch", "24.01-py3")),
    ("ctl:5000/site/tool:1", ImageRef("ctl:5000", "site/tool", "1")),
    ("busybox", ImageRef("docker.io", "library/busybox", "latest")),
    ("alice/tool", ImageRef("docker.io", "alice/tool", "latest")),
    ("localhost/a_b__c.d-e---f:V1", ImageRef("localhost", "a_b__c.d-e---f", "V1")),
    ("10.0.0.1:5000/x@sha256:" + "a" * 64, ImageRef("10.0.0.1:5000", "x", None, "sha256:" + "a" * 64)),
    ("ghcr.io/o/r:t@sha256:" + "0" * 64, ImageRef("ghcr.io", "o/r", "t", "sha256:" + "0" * 64)),
])
def test_accepted(text, want):
    assert parse(text) == want


def test_file_name_is_enroots_shape():
    assert parse("nvcr.io/nvidia/pytorch:24.01-py3").file_name == "nvidia+pytorch+24.01-py3"
    assert parse("ctl:5000/x@sha256:" + "ab" * 32).file_name == "x+sha256-abababababab"
    assert str(parse("busybox")) == "docker.io/library/busybox:latest"


@pytest.mark.parametrize("text,part", [
    ("ctl:5000/x;rm -rf /", "';'"),
    ("ctl:5000/x:1 && id", "' '"),
    ("ctl:5000/$(id)", "'$'"),
    ("ctl:5000/x`id`", "'`'"),
    ("ctl:5000/x\n", "'\\n'"),
    ("ctl:5000/Site/tool:1", "path component 'Site': uppercase"),
    ("ctl:5000//tool", "empty part"),
    ("ctl:5000/tool/", "empty part"),
    ("ctl:5000/-tool", "path component '-tool'"),
    ("ctl:5000/tool:", "tag ''"),
    ("ctl:5000/tool:.x", "tag '.x'"),
    ("ctl:5000/tool@sha256:abc", "digest 'sha256:abc'"),
    ("ctl:5000/tool@sha256:" + "A" * 64, "digest"),
    ("ctl:99999/tool", "registry 'ctl:99999'"),
    ("-ctl.io/tool", "registry '-ctl.io'"),
    ("", "empty"),
    ("a.io/" + "b" * 260, "longer than 255"),
])
def test_refused_naming_the_part(text, part):
    with pytest.raises(UsageError) as exc:
        parse(text)
    assert part in str(exc.value)
    assert exc.value.fix


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=80))
def test_hostile_strings_are_refused_or_safe(text):
    try:
        ref = parse(text)
    except UsageError:
        return
    # what is accepted holds no shell character, and its file name is a plain file name
    assert re.fullmatch(r"[A-Za-z0-9._:/@-]+", str(ref))
    assert re.fullmatch(r"[A-Za-z0-9._+-]+", ref.file_name) and not ref.file_name.startswith(("-", "."))
    assert parse(str(ref)) == ref


@settings(max_examples=200, deadline=None)
@given(st.from_regex(r"[a-z0-9]{1,8}(\.[a-z0-9]{1,8})?(/[a-z0-9]{1,8}){1,3}:[A-Za-z0-9_][A-Za-z0-9_.-]{0,10}",
                     fullmatch=True))
def test_grammar_strings_round_trip(text):
    ref = parse(text)
    assert parse(str(ref)) == ref
