"""Slurm as the fan-out (docs/scale.md): node-local deploys (health, job hooks) run by corral itself
on each compute node, started through one Slurm allocation from the controller instead of one SSH
session per node from the control host.

runtime.py  corral and its Python dependencies as one relocatable tarball (the nodes' Python runs it)
wheels.py   the compiled distributions' wheels for the nodes' Python, when it is not the control host's
snapshot.py what a node needs to converge: the validated spec, the expanded nodes, the deploys
node.py     `corral node converge`: the same deploys against this machine (pyinfra @local)
slurm.py    the controller's script (salloc, sbcast, srun) and the results it brings back
"""
