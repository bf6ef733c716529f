"""The whole test session runs as corral's CLI does: gevent's monkey patching first, before anything
imports paramiko, ssl or threading (corral.cli.main's root callback does the same before a command that may
reach a node; paramiko's import of invoke is deferred there too). Without it,
pyinfra's greenlets block one another on paramiko's reads and an apply's nodes no longer run
independently, so the tests would not see what users run; some tests call main() in-process, which
patched the session part-way through, at a point that depended on the test order."""

from corral.engine import prepare_process

prepare_process()
