"""`corral images list` and `rm`: the scripts the login node runs (as root) and what their output means.

list: each `NAME.json` in the directory and the sha256 of its `NAME.sqsh`, computed again and compared
with the manifest (a mismatch, a missing image or an image without a manifest is shown, never hidden).
rm: refused while a pending or running job names the image (squeue's command and comment, and each
batch job's script as `scontrol write batch_script` gives it); then the manifest and the image removed.
An interactive `srun --container-image=...` is not visible to squeue: it is not seen (docs say so)."""

from __future__ import annotations

import base64
import json

from corral.engine.shell import q

MARK = "@@corral-images"

LIST = r"""d={dir}
[ -d "$d" ] || {{ echo "{mark} NODIR"; exit 0; }}
for m in "$d"/*.json; do
  [ -f "$m" ] || continue
  n=${{m##*/}}; n=${{n%.json}}
  case "$n" in .*) continue;; esac
  echo "{mark} MANIFEST $n $(head -c 65536 "$m" | base64 -w0)"
  [ -f "$d/$n.sqsh" ] && echo "{mark} FILE $n $(stat -c %s "$d/$n.sqsh") $(sha256sum < "$d/$n.sqsh" | cut -d' ' -f1)"
done
for s in "$d"/*.sqsh; do
  [ -f "$s" ] || continue
  n=${{s##*/}}; n=${{n%.sqsh}}
  case "$n" in .*) continue;; esac
  [ -f "$d/$n.json" ] || echo "{mark} ORPHAN $n $(stat -c %s "$s")"
done
true
"""

RM = r"""d={dir}; n={name}
[ -e "$d/$n.sqsh" ] || [ -e "$d/$n.json" ] || {{ echo "{mark} NONE"; exit 0; }}
jobs=$(squeue -h -t PD,R,CF,S -o '%i|%u|%o|%k' 2>/dev/null) || {{ echo "{mark} NOSQUEUE"; exit 0; }}
printf '%s\n' "$jobs" | grep -F -- "$d/$n.sqsh" | cut -d'|' -f1,2 | sed "s/^/{mark} USED /"
for id in $(printf '%s\n' "$jobs" | cut -d'|' -f1); do
  scontrol write batch_script "$id" - 2>/dev/null | grep -qF -- "$d/$n.sqsh" && echo "{mark} USED $id|script"
done
echo "{mark} CHECKED"
"""

REMOVE = r"""d={dir}; n={name}
rm -f -- "$d/$n.json" "$d/$n.sqsh" && echo "{mark} REMOVED"
"""


def list_script(directory: str) -> str:
    return LIST.format(dir=q(directory), mark=MARK)


def rm_check_script(directory: str, name: str) -> str:
    return RM.format(dir=q(directory), name=q(name), mark=MARK)


def remove_script(directory: str, name: str) -> str:
    return REMOVE.format(dir=q(directory), name=q(name), mark=MARK)


def marks(text: str) -> list[tuple[str, list[str]]]:
    got = []
    for line in text.splitlines():
        if line.startswith(MARK + " "):
            key, *rest = line[len(MARK) + 1:].split(" ")
            got.append((key, rest))
    return got


def images(text: str, directory: str) -> list[dict]:
    """One row per image: name, ref, digest, size, sha256, time, and `problem` (None when the image's
    file is there with the size and sha256 its manifest records)."""
    rows: dict[str, dict] = {}
    for key, words in marks(text):
        if key == "MANIFEST" and len(words) == 2:
            try:
                m = json.loads(base64.b64decode(words[1]))
                m = m if isinstance(m, dict) else {}
            except ValueError:
                m = {}
            rows[words[0]] = {"name": words[0], "path": f"{directory}/{words[0]}.sqsh", "ref": m.get("ref"),
                              "digest": m.get("digest"), "size": m.get("size"), "sha256": m.get("sha256"),
                              "time": m.get("time"), "node": m.get("node"),
                              "problem": None if m else "the manifest is not a JSON object", "_file": None}
        elif key == "FILE" and len(words) == 3 and words[0] in rows:
            rows[words[0]]["_file"] = (int(words[1]), words[2])
        elif key == "ORPHAN" and len(words) == 2:
            rows[words[0]] = {"name": words[0], "path": f"{directory}/{words[0]}.sqsh", "ref": None, "digest": None,
                              "size": int(words[1]), "sha256": None, "time": None, "node": None,
                              "problem": "no manifest (not made by corral images pull, or its pull was cut "
                                         "short): corral images rm NAME removes it", "_file": "orphan"}
    for row in rows.values():
        got = row.pop("_file")
        if got == "orphan" or row["problem"]:
            continue
        if got is None:
            row["problem"] = "the .sqsh is missing"
        elif got[1] != row["sha256"]:
            row["problem"] = f"sha256 mismatch: the file is {got[1]}, the manifest says {row['sha256']}"
        elif got[0] != row["size"]:
            row["problem"] = f"size mismatch: the file has {got[0]} bytes, the manifest says {row['size']}"
    return sorted(rows.values(), key=lambda r: r["name"])
