"""Importers of other tools' inventories into a cluster.yaml (DeepOps)."""
