"""Air-gapped installs: `corral bundle build` (build.py, resolve.py, sign.py), `verify` (verify.py) and
`diff` (diff.py); the virtual cluster serves a verified bundle's repository instead of its own."""
