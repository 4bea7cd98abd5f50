"""The demo's check of the per-tenant ordered writer, read from its table rather than assumed.

Each applied write is a ledger row in the tenant's partition (``consumers.ordered_table``); the audit
counts rows whose sequence does not rise above the previous row's (out of order) and sequences that
appear twice (double-applied), and which writers (instances) applied a tenant's writes.
"""

from __future__ import annotations

import logging
from typing import Any

from azure.core.exceptions import ResourceNotFoundError

from consumers.ordered_table import TenantAudit, audit_table

log = logging.getLogger("devhost.demo")


def ordered_audit(host: Any, table_name: str) -> dict[str, TenantAudit] | None:
    try:
        return audit_table(host.table_client(table_name))
    except ResourceNotFoundError:  # the writer creates the table with its first write
        return {}
    except Exception as exc:
        log.warning("cannot read the ordered writes table %s: %s", table_name, exc)
        return None


def ordered_panel(audits: dict[str, TenantAudit] | None) -> tuple[dict[str, tuple[int, int]], tuple[int, int]]:
    """For the dashboard: tenant -> (writes applied, instances that applied them); (out of order, twice)."""
    if not audits:
        return {}, (0, 0)
    return ({tenant: (audit.applied, len(audit.writers)) for tenant, audit in audits.items()},
            (sum(a.out_of_order for a in audits.values()), sum(a.double_applied for a in audits.values())))


def ordered_summary_lines(audits: dict[str, TenantAudit] | None, note: str = "") -> list[str]:
    if audits is None:
        return ["ordered writes: - (table not readable)"]
    if not audits:
        return ["ordered writes: none applied"]
    per_tenant = ", ".join(f"{tenant} {audit.applied}" for tenant, audit in sorted(audits.items()))
    out_of_order = sum(a.out_of_order for a in audits.values())
    doubled = sum(a.double_applied for a in audits.values())
    writers = set().union(*(a.writers for a in audits.values()))
    held = ", ".join(f"{tenant} {len(audit.writers)}" for tenant, audit in sorted(audits.items()))
    return [
        f"ordered writes per tenant: {per_tenant}; {out_of_order} out-of-order, {doubled} double-applied "
        f"(audited from the table)",
        f"ordered writer: {len(writers)} writer(s) applied writes (an instance started again after a stop is a "
        f"new writer); writers that applied each tenant's: {held}"
        + (f"; {note}" if note else ""),
    ]
