"""`corral images pull REF`: one Slurm batch job converts an image to `DIR/NAME.sqsh` on shared storage.

Submitted as root from the first login node (images_place.py): the directory is root's tree on shared
storage, which no user may write, and the job runs nothing from the image (podman pulls it, `create` and
`export` only copy its files). It writes only into `DIR/.incoming` (its squashed root may); the maker
node (root unsquashed) prepares that directory, then owns the result to root and renames it. On the compute node Slurm picks, the job pulls REF with podman into a
private store under /var/tmp (through registries.conf's mirrors, so a cached upstream comes from the
cluster's cache; TLS trusts corral's CA; podman's overlay driver, vfs where /var/tmp is itself on
overlayfs, as on the virtual cluster's nodes), unpacks the container's root filesystem, and makes the squashfs
with mksquashfs (enroot's options, `-comp lzo -noD`) as `DIR/.incoming/corral-image-pull-TOKEN.sqsh`;
its store is removed on every way out. Then corral writes the manifest (`NAME.json`: ref, digest, size,
sha256, node, job, time) and renames both into place: a reader never sees a half-written image.
Bounded: the job has a time limit, sbatch --wait runs under `timeout`; at the bound, on a failure or on
Ctrl-C the job is cancelled and the partial files are removed (`cleanup`)."""

from __future__ import annotations

import datetime as dt
import json
import secrets

from corral.engine.shell import q
from corral.spec.image_ref import ImageRef
from corral.workflows import batch_job

MARK = "@@corral-image"
JOB_PREFIX = "corral-image-pull-"
SQUASH = "-noappend -no-progress -comp lzo -noD"  # enroot's default ENROOT_SQUASH_OPTIONS

JOB = r"""set -u
store=/var/tmp/{job}
drv=overlay
pod() {{ podman --root "$store/storage" --runroot "$store/run" --storage-driver "$drv" "$@"; }}
done_() {{ pod rm -f {job} >/dev/null 2>&1; rm -rf "$store"; }}
trap 'done_; rm -f {part}; exit 143' TERM INT
trap done_ EXIT
fail() {{ echo "{mark} FAIL $1"; exit 1; }}
mkdir -m 0700 "$store" || fail "cannot make $store"
[ "$(stat -f -c %T "$store")" = overlayfs ] && drv=vfs  # overlay cannot stack on overlayfs (a container's root)
pod pull -q {ref} >/dev/null 2>"$store/err" || fail "podman pull: $(tail -n 3 "$store/err" | tr '\n' ' ')"
digest=$(pod image inspect --format '{{{{.Digest}}}}' {ref} 2>"$store/err") \
  || fail "podman image inspect: $(tail -n 3 "$store/err" | tr '\n' ' ')"
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

# On the maker node (root is root there): the directory, and the staging directory the job may write.
PREPARE = r"""mkdir -p {mdir} && chmod 0755 {mdir} && mkdir -p {mincoming} && chown {owner} {mincoming} \
  && chmod 0700 {mincoming} || {{ echo "{mark} FAIL cannot make {mincoming} on $(hostname)"; exit 0; }}
[ -e {mfinal} ] && {{ echo "{mark} EXISTS"; exit 0; }}
echo "{mark} READY"
"""

# Ctrl-C, a lost connection or a failed step: the job cancelled and waited for on the login node
# (batch_job.py), then what it left removed on the maker node (CLEAN).
CLEAN = r"""rm -f {mpart} {mlog} {mtmp_json}
"""

# On the maker node: the job's log gone, the manifest in from stdin, both owned by root and renamed into
# place (the image first: list shows an image only with its manifest).
PLACE = r"""set -e
rm -f {mlog}
[ ! -e {mfinal} ] || {{ echo "{mark} EXISTS"; rm -f {mpart}; exit 0; }}
cat > {mtmp_json}
chown 0:0 {mpart} {mtmp_json}
chmod 0644 {mpart} {mtmp_json}
mv -f {mpart} {mfinal}
mv -f {mtmp_json} {mmanifest}
echo "{mark} PLACED"
"""


class Pull:
    """One pull's names, as the login and compute nodes see them (`dir`) and on the maker node (`mdir`)."""

    def __init__(self, ref: ImageRef, directory: str, maker_dir: str | None = None, owner: str = "65534:65534",
                 token: str | None = None) -> None:
        self.ref, self.dir, self.mdir, self.owner = ref, directory, maker_dir or directory, owner
        self.token = token or secrets.token_hex(4)
        self.job = JOB_PREFIX + self.token
        self.name = ref.file_name
        self.final = f"{directory}/{self.name}.sqsh"
        self.log = f"{directory}/.incoming/{self.job}.log"  # the job's output (batch_job.py quotes it)

    def _words(self) -> dict[str, str]:
        w: dict[str, str] = {}
        for prefix, d in (("", self.dir), ("m", self.mdir)):
            w |= {prefix + "dir": d, prefix + "incoming": f"{d}/.incoming", prefix + "part": f"{d}/.incoming/{self.job}.sqsh",
                  prefix + "log": f"{d}/.incoming/{self.job}.log", prefix + "tmp_json": f"{d}/.incoming/{self.job}.json",
                  prefix + "final": f"{d}/{self.name}.sqsh", prefix + "manifest": f"{d}/{self.name}.json"}
        return {k: q(v) for k, v in w.items()} | {"job": q(self.job), "owner": q(self.owner), "mark": MARK}

    def job_script(self) -> str:
        return JOB.format(job=self.job, part=self._words()["part"], ref=q(str(self.ref)), mark=MARK, squash=SQUASH)

    def prepare_script(self) -> str:
        return PREPARE.format(**self._words())

    def submit_script(self, wait: int) -> str:
        """On the login node: the job, bounded; cancelled at the bound."""
        return batch_job.submit_script(self.job, self.log, self.job_script(), wait, MARK)

    def cancel_script(self) -> str:
        return batch_job.cancel_script(self.job)

    def clean_script(self) -> str:
        return CLEAN.format(**self._words())

    def place_script(self) -> str:
        return PLACE.format(**self._words())

    def manifest_text(self, got: dict[str, str], now: dt.datetime | None = None) -> str:
        when = (now or dt.datetime.now(dt.timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
        return json.dumps({"name": self.name, "ref": str(self.ref), "digest": got["DIGEST"],
                           "size": int(got["SIZE"]), "sha256": got["SHA256"], "node": got.get("NODE"),
                           "job": got.get("JOB"), "time": when}, indent=2) + "\n"


def parse(text: str) -> dict[str, str]:
    """The MARK lines: KEY value (the last of each key)."""
    return batch_job.parse_marks(text, MARK)
