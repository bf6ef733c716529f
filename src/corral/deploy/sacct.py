"""accounting sync (on the controller): cluster, QOS, accounts and users from the spec, applied
with sacctmgr idempotently: create what is missing, update what differs, report what exists only in the
database. The one deletion: the associations of a user corral managed (its record on this node,
/var/lib/corral/users: deploy/users.py) that left the spec. The diffing is pure: deploy/sacct_sync.py."""

from __future__ import annotations

from pyinfra import host
from pyinfra.api import FactBase, deploy, operation

from corral.deploy import operations
from corral.deploy.sacct_sync import QUERY_COMMANDS, AcctState, parse_state, plan_sync
from corral.engine import run_context
from corral.errors import CorralError
from corral.facts.accounts import ManagedUsers

MARK = "@@corral:"


class AccountingState(FactBase):
    """The output of every sacctmgr query, read in one command."""

    def command(self):
        run = " ".join(f"( {cmd} > \"$d/{key}\" 2>&1 ) &" for key, cmd in QUERY_COMMANDS.items())
        show = "; ".join(f"echo '{MARK}{key}'; cat \"$d/{key}\"" for key in QUERY_COMMANDS)
        return f"d=$(mktemp -d); {run} wait; {show}; rm -rf \"$d\"; true"  # queries in parallel

    def process(self, output) -> dict[str, str]:
        outputs: dict[str, list[str]] = {}
        current = None
        for line in output:
            if line.startswith(MARK):
                current = line[len(MARK):]
                outputs[current] = []
            elif current is not None:
                outputs[current].append(line)
        return {k: "\n".join(v) for k, v in outputs.items()}


@operation()
def sync(cluster):
    outputs = host.get_fact(AccountingState) or {}
    try:
        current = parse_state(outputs)
    except CorralError as exc:
        if run_context.current().executing:  # apply: the database must answer now
            raise CorralError(f"cannot read the accounting database with sacctmgr: {exc}",
                              fix="check slurmdbd on the accounting node (journalctl -u slurmdbd)") from None
        current = AcctState()  # plan before slurmdbd runs: everything will be created
    spec_users = {u.name for u in cluster.spec.users}
    removed = {n for n in (host.get_fact(ManagedUsers) or {}) if n not in spec_users}  # locked by users
    plan = plan_sync(cluster, current, removed=removed)
    extra = f" (only in the database, kept: {', '.join(plan.extra)})" if plan.extra else ""
    if not plan.commands:
        host.noop(f"accounting matches the spec{extra}")
        return
    lines = "".join(f"{'-' if ' delete ' in c else '+'} {c}\n" for c in plan.commands)
    operations.annotate(disruption="none", diff=lines + (extra and f"{extra}\n"))
    yield from plan.commands


@deploy("accounting sync")
def accounting_sync() -> None:
    node, cluster = host.data.corral_node, host.data.corral_cluster
    if node.name != cluster.with_role("controller")[0].name or not cluster.with_role("accounting"):
        return
    sync(name="cluster, QOS, accounts and users (sacctmgr)", cluster=cluster)
