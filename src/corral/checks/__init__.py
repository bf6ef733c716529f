"""Checks return structured results (result.Check, result.Report); the CLI renders them."""
