"""Role assignments: the GUID is the built-in role the template claims, and the scope is the narrowest
resource at which that role still works for what this project does with it.

The GUIDs come from the "Azure built-in roles" reference (role-based-access-control/built-in-roles);
azure-mgmt-authorization does not ship them. docs/infra.md has the table with its sources.
"""

from __future__ import annotations

import re
from typing import Any

from infra.check.evaluate import GUID_RE, ResourceRef, Unknown

BUILT_IN_ROLES: dict[str, str] = {
    "Azure Service Bus Data Owner": "090c5cfd-751d-490a-894a-3ce6f1109419",
    "Azure Service Bus Data Receiver": "4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0",
    "Azure Service Bus Data Sender": "69a216fc-b8fb-44d8-bc22-1f3c2cd27a39",
    "Storage Blob Data Contributor": "ba92f5b4-2d11-453d-a403-e96b0029c9fe",
    "Storage Blob Data Owner": "b7e6dc6d-f1e8-4753-8033-0f276bb0955b",
    "Storage Blob Data Reader": "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1",
    "Storage Queue Data Contributor": "974c5e8b-45b9-4653-ba55-5f855dd0fb88",
    "Storage Queue Data Reader": "19e7f393-937e-4f77-808e-94535e297925",
    "Storage Table Data Contributor": "0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3",
    "Storage Table Data Reader": "76199698-9eea-4c19-bc75-cec21354c6b6",
    "Monitoring Metrics Publisher": "3913510d-42f4-4e42-8a64-420c390055eb",
}
ROLE_BY_GUID = {guid: name for name, guid in BUILT_IN_ROLES.items()}

SB = "microsoft.servicebus/namespaces"
ST = "microsoft.storage/storageaccounts"
# Role -> resource types it may be scoped to, narrowest first, and why the widest allowed one is needed.
ALLOWED_SCOPES: dict[str, tuple[set[str], str]] = {
    "Azure Service Bus Data Sender": ({f"{SB}/queues", f"{SB}/topics"}, "send to one queue or topic"),
    "Azure Service Bus Data Receiver": (
        {f"{SB}/queues", f"{SB}/topics/subscriptions"},
        "receive from one queue or subscription (a topic-scoped grant does not let a trigger read a subscription)",
    ),
    "Azure Service Bus Data Owner": (
        {f"{SB}/queues", f"{SB}/topics", f"{SB}/topics/subscriptions"}, "one entity",
    ),
    "Storage Blob Data Owner": (
        {ST, f"{ST}/blobservices/containers"},
        "the Functions host creates its containers in AzureWebJobsStorage, an account-level request",
    ),
    "Storage Blob Data Contributor": ({ST, f"{ST}/blobservices/containers"}, "account or container"),
    "Storage Blob Data Reader": ({ST, f"{ST}/blobservices/containers"}, "account or container"),
    "Storage Queue Data Contributor": ({ST, f"{ST}/queueservices/queues"}, "account or queue"),
    "Storage Queue Data Reader": ({ST, f"{ST}/queueservices/queues"}, "account or queue"),
    "Storage Table Data Contributor": (
        {ST, f"{ST}/tableservices/tables"},
        "the table sink creates its table on first use, which is an account-level request",
    ),
    "Storage Table Data Reader": ({ST, f"{ST}/tableservices/tables"}, "account or table"),
    "Monitoring Metrics Publisher": ({"microsoft.insights/components"}, "the Application Insights resource"),
}


def _normal(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def claimed_role(source: str) -> str | None:
    """The role the template names next to the GUID: the last identifier of the roleDefinitionId
    expression (``roleIds.serviceBusDataSender`` -> "Azure Service Bus Data Sender")."""
    words = [w for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", source)
             if w not in {"subscriptionResourceId", "resourceId", "tenantResourceId", "roleDefinitions",
                          "Microsoft", "Authorization", "roleIds", "id"}]
    for word in reversed(words):
        key = _normal(word).removesuffix("roleid").removesuffix("role")
        if not key:
            continue
        matches = [name for name in BUILT_IN_ROLES if _normal(name) == key or _normal(name).endswith(key)]
        if len(matches) == 1:
            return matches[0]
    return None


def check_role_assignment(ref: ResourceRef, source: str, report: Any) -> None:
    """report(line, path, message); ``source`` is the text of the roleDefinitionId expression."""
    body = ref.body if isinstance(ref.body, dict) else {}
    raw = body.get("properties")
    props = raw if isinstance(raw, dict) else {}
    lines = getattr(props, "lines", {})
    role_line = lines.get("roleDefinitionId", ref.decl.line)
    role_id = props.get("roleDefinitionId")
    if isinstance(role_id, Unknown) or role_id is None:
        report(role_line, "properties.roleDefinitionId", "role definition id is not known before deployment: "
                                                           "use subscriptionResourceId() with a literal GUID")
        return
    guids = GUID_RE.findall(str(role_id))
    if not guids or ("roleDefinitions" not in str(role_id) and len(str(role_id)) != 36):
        report(role_line, "properties.roleDefinitionId", f"{role_id!r} is not a role definition id")
        return
    guid = guids[-1].lower()
    actual = ROLE_BY_GUID.get(guid)
    claimed = claimed_role(source)
    if actual is None:
        report(role_line, "properties.roleDefinitionId",
               f"{guid} is not one of the built-in roles this project checks against"
               + (f" (it is used as {claimed}, which is {BUILT_IN_ROLES[claimed]})" if claimed else ""))
        return
    if claimed is not None and claimed != actual:
        report(role_line, "properties.roleDefinitionId",
               f"{guid} is {actual}, not {claimed} ({claimed} is {BUILT_IN_ROLES[claimed]})")
        return
    _check_scope(ref, body, actual, report)


def _check_scope(ref: ResourceRef, body: dict[str, Any], role: str, report: Any) -> None:
    scope_line = getattr(body, "lines", {}).get("scope", ref.decl.line)
    scope = body.get("scope")
    allowed, why = ALLOWED_SCOPES.get(role, (set(), ""))
    if not allowed:
        return
    if not isinstance(scope, ResourceRef):
        where = "the deployment's resource group" if scope is None else repr(scope)
        report(scope_line, "scope", f"{role} is granted on {where}; narrowest that works: {why}")
        return
    if scope.decl.type.lower() not in allowed:
        report(scope_line, "scope", f"{role} is granted on a {scope.decl.type}; narrowest that works: {why}")
