"""Test scaffolding, not product: the engine smoke deploy (memcached installed, configured per node,
running) and its check (memcached answers on each node's own address). The engine's own tests apply it
to prove the engine end to end on virtual nodes (tests/vcluster/test_engine_smoke.py)."""
