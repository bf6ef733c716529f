"""Air-gapped installs: `corral bundle build` (build.py, resolve.py, sign.py), `verify` (verify.py) and
`diff` (diff.py); the virtual cluster serves a verified bundle's repository instead of its own."""

VALID_DAYS = 90  # a bundle's default lifetime: InRelease's Valid-Until and the manifest's valid_until
