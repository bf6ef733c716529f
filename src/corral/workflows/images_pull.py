"""`corral images pull REF`: one Slurm batch job converts an image to `DIR/NAME.sqsh` on shared storage.

Submitted as root from the first login node (images_place.py): the directory is root's tree on shared
storage, which no user may write, and the job runs nothing from the image (podman pulls it, `create` and
`export` only copy its files). On the compute node Slurm picks, the job pulls REF with podman into a
private store under /var/tmp (through registries.conf's mirrors, so a cached upstream comes from the
cluster's cache; TLS trusts corral's CA), unpacks the container's root filesystem, and makes the squashfs
with mksquashfs (enroot's options, `-comp lzo -noD`) as `DIR/.corral-pull-TOKEN.sqsh`; its store is
removed on every way out. Back on the login node corral writes the manifest (`NAME.json`: ref, digest,
size, sha256, node, job, time) and renames both into place: a reader never sees a half-written image.
Bounded: the job has a time limit, sbatch --wait runs under `timeout`; at the bound, on a failure or on
Ctrl-C the job is cancelled and the partial files are removed (`cleanup`)."""

from __future__ import annotations

import datetime as dt
import json
import secrets

from corral.engine.shell import q
from corral.spec.image_ref import ImageRef

MARK = "@@corral-image"
JOB_PREFIX = "corral-image-pull-"
SQUASH = "-noappend -no-progress -comp lzo -noD"  # enroot's default ENROOT_SQUASH_OPTIONS

JOB = r"""set -u
store=/var/tmp/{job}
pod() {{ podman --root "$store/storage" --runroot "$store/run" "$@"; }}
done_() {{ pod rm -f {job} >/dev/null 2>&1; rm -rf "$store"; }}
trap 'done_; rm -f {part}; exit 143' TERM INT
trap done_ EXIT
fail() {{ echo "{mark} FAIL $1"; exit 1; }}
mkdir -m 0700 "$store" || fail "cannot make $store"
pod pull -q {ref} >/dev/null 2>"$store/err" || fail "podman pull: $(tail -n 3 "$store/err" | tr '\n' ' ')"
digest=$(pod image inspect --format '{{{{.Digest}}}}' {ref}) || fail "podman image inspect"
pod create --name {job} {ref} true >/dev/null 2>"$store/err" || fail "podman create: $(tail -n 2 "$store/err")"
mkdir "$store/rootfs" && pod export {job} | tar -C "$store/rootfs" --numeric-owner -xf - \
  || fail "podman export | tar"
mksquashfs "$store/rootfs" {part} {squash} >/dev/null 2>"$store/err" \
  || {{ rm -f {part}; fail "mksquashfs: $(tail -n 2 "$store/err" | tr '\n' ' ')"; }}
chmod 0644 {part}
echo "{mark} DIGEST $digest"
echo "{mark} SHA256 $(sha256sum {part} | cut -d' ' -f1)"
echo "{mark} SIZE $(stat -c %s {part})"
echo "{mark} NODE $(hostname)"
"""

SUBMIT = r"""cd / || exit 1
mkdir -p {dir} && chmod 0755 {dir} || {{ echo "{mark} FAIL cannot make {dir}"; exit 0; }}
[ -e {final} ] && {{ echo "{mark} EXISTS"; exit 0; }}
out=$(timeout {wait} sbatch --parsable --wait -N1 -n1 -t {limit} -J {job} -o {log} --wrap {script} 2>&1); rc=$?
id=$(printf '%s\n' "$out" | grep -Eo '^[0-9]+' | head -n1)
if [ "$rc" -ne 0 ] && [ -n "$id" ]; then
  echo "{mark} STATE $(squeue -h -j "$id" -o %T 2>/dev/null | head -n1)"
  scancel "$id" 2>/dev/null
fi
echo "{mark} RC $rc"
echo "{mark} JOB ${{id:-none}}"
echo "{mark} SBATCH $(printf '%s' "$out" | tail -n 2 | tr '\n' ' ')"
[ -f {log} ] && grep -a "^{mark} " {log}
rm -f {log}
[ "$rc" -eq 0 ] || rm -f {part}
true
"""

# Ctrl-C, a lost connection or a failed step: the job cancelled, waited for (so it writes no more), then
# what it left removed; the manifest's temporary file too.
CLEANUP = r"""scancel -n {job} 2>/dev/null
for _ in $(seq 20); do [ -z "$(squeue -h -n {job} -o %i 2>/dev/null)" ] && break; sleep 1; done
rm -f {part} {log} {tmp_json}
"""

# The manifest in from stdin, then both renamed into place (the image last-but-one: list shows an image
# only with its manifest, and a manifest never without its image).
PLACE = r"""set -e
[ ! -e {final} ] || {{ echo "{mark} EXISTS"; rm -f {part}; exit 0; }}
cat > {tmp_json}
chmod 0644 {tmp_json}
mv -f {part} {final}
mv -f {tmp_json} {manifest}
echo "{mark} PLACED"
"""


class Pull:
    """One pull's names: the job's, its partial file's, the image's and its manifest's."""

    def __init__(self, ref: ImageRef, directory: str, token: str | None = None) -> None:
        self.ref, self.dir = ref, directory
        self.token = token or secrets.token_hex(4)
        self.job = JOB_PREFIX + self.token
        self.name = ref.file_name
        base = f"{directory}/.{self.job}"
        self.part, self.log, self.tmp_json = base + ".sqsh", base + ".log", base + ".json"
        self.final, self.manifest = f"{directory}/{self.name}.sqsh", f"{directory}/{self.name}.json"

    def _words(self) -> dict[str, str]:
        return {k: q(v) for k, v in (("dir", self.dir), ("part", self.part), ("log", self.log), ("job", self.job),
                                     ("final", self.final), ("tmp_json", self.tmp_json),
                                     ("manifest", self.manifest))}

    def job_script(self) -> str:
        w = self._words()
        return JOB.format(job=self.job, part=w["part"], ref=q(str(self.ref)), mark=MARK, squash=SQUASH)

    def submit_script(self, wait: int) -> str:
        return SUBMIT.format(**self._words(), mark=MARK, wait=int(wait), limit=max(1, -(-int(wait) // 60)),
                             script=q(self.job_script()))

    def cleanup_script(self) -> str:
        return CLEANUP.format(**self._words())

    def place_script(self) -> str:
        return PLACE.format(**self._words(), mark=MARK)

    def manifest_text(self, got: dict[str, str], now: dt.datetime | None = None) -> str:
        when = (now or dt.datetime.now(dt.timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
        return json.dumps({"name": self.name, "ref": str(self.ref), "digest": got["DIGEST"],
                           "size": int(got["SIZE"]), "sha256": got["SHA256"], "node": got.get("NODE"),
                           "job": got.get("JOB"), "time": when}, indent=2) + "\n"


def parse(text: str) -> dict[str, str]:
    """The MARK lines: KEY value (the last of each key)."""
    got: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith(MARK + " "):
            key, _, value = line[len(MARK) + 1:].partition(" ")
            got[key] = value.strip()
    return got
