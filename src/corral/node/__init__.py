"""Code that runs ON cluster nodes: stdlib-only Python, copied to nodes as plain files.

Nothing here imports corral (or anything outside the standard library) at run time. The health
checker is health.py (+ health_checks.py, health_parse.py, health_slurm.py beside it).
"""
