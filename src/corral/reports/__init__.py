"""Reports from the cluster's own records: `corral report usage` (GPU usage and chargeback from Slurm
accounting). sacct.py: the query and its parser; usage.py: the figures; report.py: window, seam, result."""
