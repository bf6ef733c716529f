"""Checks return structured results (CheckResult); the CLI renders them."""
