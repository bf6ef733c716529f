"""Custom pyinfra facts: a shell command plus a pure parser, tested on captured output (tests/fixtures/)."""
