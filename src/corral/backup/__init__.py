"""Backups: take (corral backup), archive (the file format), local_state (corral state dir), restore."""
