"""Create or update the Service Bus topology of ``infra/servicebus.json`` through Azure Resource Manager.

Bicep (``infra/main.bicep``) is the normal way to deploy; this script exists for the cases Bicep does not
cover: re-applying the topology to an existing namespace after editing ``servicebus.json`` without a full
``azd provision``, applying it to a namespace someone else owns, or to an ARM-compatible surface of an
emulator (``--base-url`` with ``--credential sas``: a token signed with the namespace key, which
sbemulator's ARM surface verifies; ``--credential none`` sends a fixed ``--token`` for mocks).

The work is split in two so the interesting part can be tested without Azure:

* :func:`plan_from_topology` is a pure function from the topology (the official emulator's Config.json
  schema) to an ordered list of :class:`PlannedOperation` (ARM PUTs with their JSON bodies);
* :func:`apply_plan` sends that plan through ``azure-mgmt-servicebus``.

Every operation is a PUT (create-or-update), so running the script twice is harmless.  ``--dry-run``
prints the plan and touches nothing.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import os
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from azure.core.pipeline.policies import SansIOHTTPPolicy

DEFAULT_TOPOLOGY = Path(__file__).resolve().parent / "servicebus.json"
# The Microsoft.ServiceBus API version the plan targets; main.bicep uses the same one.
API_VERSION = "2026-01-01"

# Config.json property -> ARM property, per entity kind.  Anything not listed is rejected, so a
# property that the emulator knows but this script would silently drop cannot slip through.
_QUEUE_PROPERTIES = {
    "DeadLetteringOnMessageExpiration": "deadLetteringOnMessageExpiration",
    "DefaultMessageTimeToLive": "defaultMessageTimeToLive",
    "DuplicateDetectionHistoryTimeWindow": "duplicateDetectionHistoryTimeWindow",
    "ForwardDeadLetteredMessagesTo": "forwardDeadLetteredMessagesTo",
    "ForwardTo": "forwardTo",
    "LockDuration": "lockDuration",
    "MaxDeliveryCount": "maxDeliveryCount",
    "RequiresDuplicateDetection": "requiresDuplicateDetection",
    "RequiresSession": "requiresSession",
}
_TOPIC_PROPERTIES = {
    "DefaultMessageTimeToLive": "defaultMessageTimeToLive",
    "DuplicateDetectionHistoryTimeWindow": "duplicateDetectionHistoryTimeWindow",
    "RequiresDuplicateDetection": "requiresDuplicateDetection",
}
_SUBSCRIPTION_PROPERTIES = {
    "DeadLetteringOnMessageExpiration": "deadLetteringOnMessageExpiration",
    "DefaultMessageTimeToLive": "defaultMessageTimeToLive",
    "ForwardDeadLetteredMessagesTo": "forwardDeadLetteredMessagesTo",
    "ForwardTo": "forwardTo",
    "LockDuration": "lockDuration",
    "MaxDeliveryCount": "maxDeliveryCount",
    "RequiresSession": "requiresSession",
}
_CORRELATION_PROPERTIES = {
    "ContentType": "contentType",
    "CorrelationId": "correlationId",
    "Label": "label",
    "MessageId": "messageId",
    "ReplyTo": "replyTo",
    "ReplyToSessionId": "replyToSessionId",
    "SessionId": "sessionId",
    "To": "to",
    "Properties": "properties",
}
# Config.json writes "no forwarding" as an empty string; ARM wants the property absent.
_OMIT_WHEN_EMPTY = {"forwardTo", "forwardDeadLetteredMessagesTo"}


class TopologyError(ValueError):
    """The topology file does not follow the emulator's Config.json schema as this script reads it."""


@dataclass(frozen=True)
class PlannedOperation:
    """One ARM create-or-update: which entity, and the exact JSON body that will be PUT."""

    kind: str  # "namespace", "queue", "topic", "subscription" or "rule"
    names: tuple[str, ...]  # () for the namespace; (queue,), (topic,), (topic, sub), (topic, sub, rule)
    body: dict[str, Any] = field(hash=False)

    @property
    def name(self) -> str:
        return "/".join(self.names) if self.names else "<namespace>"

    def relative_path(self) -> str:
        """The entity's path below the namespace resource id (empty for the namespace itself)."""
        if self.kind == "namespace":
            return ""
        if self.kind == "queue":
            return f"/queues/{self.names[0]}"
        if self.kind == "topic":
            return f"/topics/{self.names[0]}"
        if self.kind == "subscription":
            return f"/topics/{self.names[0]}/subscriptions/{self.names[1]}"
        if self.kind == "rule":
            return f"/topics/{self.names[0]}/subscriptions/{self.names[1]}/rules/{self.names[2]}"
        raise TopologyError(f"unknown operation kind {self.kind!r}")

    def arm_path(self, subscription_id: str, resource_group: str, namespace: str) -> str:
        return (
            f"/subscriptions/{subscription_id}/resourceGroups/{resource_group}"
            f"/providers/Microsoft.ServiceBus/namespaces/{namespace}{self.relative_path()}"
        )


def load_topology(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a Config.json-style topology file; fail early with the file name when it is not JSON."""
    try:
        with open(path, encoding="utf-8") as handle:
            topology = json.load(handle)
    except json.JSONDecodeError as exc:
        raise TopologyError(f"{path}: not valid JSON: {exc}") from exc
    if not isinstance(topology, dict):
        raise TopologyError(f"{path}: the top level must be an object")
    return topology


def _namespace_of(topology: Mapping[str, Any]) -> Mapping[str, Any]:
    try:
        namespaces = topology["UserConfig"]["Namespaces"]
    except (KeyError, TypeError) as exc:
        raise TopologyError("missing UserConfig.Namespaces") from exc
    if not isinstance(namespaces, list) or len(namespaces) != 1:
        raise TopologyError(
            "UserConfig.Namespaces must hold exactly one namespace (the one this deployment provisions)"
        )
    return namespaces[0]


def _entity_name(entity: Mapping[str, Any], where: str) -> str:
    name = entity.get("Name") if isinstance(entity, Mapping) else None
    if not isinstance(name, str) or not name:
        raise TopologyError(f"{where}: every entity needs a non-empty Name")
    return name


def _map_properties(raw: Any, mapping: Mapping[str, str], where: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise TopologyError(f"{where}: Properties must be an object")
    unknown = sorted(set(raw) - set(mapping))
    if unknown:
        raise TopologyError(f"{where}: unsupported properties {unknown}")
    properties: dict[str, Any] = {}
    for key, value in raw.items():
        arm_key = mapping[key]
        if arm_key in _OMIT_WHEN_EMPTY and value in ("", None):
            continue
        properties[arm_key] = value
    return properties


def _rule_body(rule: Mapping[str, Any], where: str) -> dict[str, Any]:
    props = rule.get("Properties")
    if not isinstance(props, Mapping):
        raise TopologyError(f"{where}: a rule needs Properties")
    filter_type = props.get("FilterType")
    body: dict[str, Any]
    if filter_type == "Sql":
        expression = (props.get("SqlFilter") or {}).get("SqlExpression")
        if not isinstance(expression, str) or not expression.strip():
            raise TopologyError(f"{where}: a Sql rule needs SqlFilter.SqlExpression")
        body = {"filterType": "SqlFilter", "sqlFilter": {"sqlExpression": expression}}
    elif filter_type == "Correlation":
        correlation = _map_properties(props.get("CorrelationFilter"), _CORRELATION_PROPERTIES, where)
        if not correlation:
            raise TopologyError(f"{where}: a Correlation rule needs at least one CorrelationFilter field")
        body = {"filterType": "CorrelationFilter", "correlationFilter": correlation}
    else:
        raise TopologyError(f"{where}: FilterType must be 'Sql' or 'Correlation', not {filter_type!r}")
    action = (props.get("Action") or {}).get("SqlExpression")
    if action:
        body["action"] = {"sqlExpression": action}
    return {"properties": body}


def namespace_operation(location: str, sku: str = "Standard") -> PlannedOperation:
    """The namespace PUT: identity-only access (no SAS keys) and TLS 1.2, as main.bicep does."""
    return PlannedOperation(
        kind="namespace",
        names=(),
        body={
            "location": location,
            "sku": {"name": sku, "tier": sku},
            "properties": {"disableLocalAuth": True, "minimumTlsVersion": "1.2"},
        },
    )


def plan_from_topology(
    topology: Mapping[str, Any], *, namespace_location: str | None = None, namespace_sku: str = "Standard"
) -> list[PlannedOperation]:
    """Turn a topology into ordered ARM PUTs: namespace (if a location is given), queues, then each topic
    followed by its subscriptions and their rules (a child is always after its parent)."""
    namespace = _namespace_of(topology)
    plan: list[PlannedOperation] = []
    if namespace_location:
        plan.append(namespace_operation(namespace_location, namespace_sku))

    seen: set[str] = set()

    def claim(name: str, where: str) -> None:
        # Queues and topics share one name space inside a Service Bus namespace.
        if name.lower() in seen:
            raise TopologyError(f"{where}: duplicate entity name {name!r}")
        seen.add(name.lower())

    for queue in namespace.get("Queues") or []:
        name = _entity_name(queue, "Queues")
        claim(name, f"queue {name}")
        properties = _map_properties(queue.get("Properties"), _QUEUE_PROPERTIES, f"queue {name}")
        plan.append(PlannedOperation("queue", (name,), {"properties": properties}))

    for topic in namespace.get("Topics") or []:
        topic_name = _entity_name(topic, "Topics")
        claim(topic_name, f"topic {topic_name}")
        properties = _map_properties(topic.get("Properties"), _TOPIC_PROPERTIES, f"topic {topic_name}")
        plan.append(PlannedOperation("topic", (topic_name,), {"properties": properties}))
        sub_names: set[str] = set()
        for subscription in topic.get("Subscriptions") or []:
            sub_name = _entity_name(subscription, f"topic {topic_name}")
            where = f"subscription {topic_name}/{sub_name}"
            if sub_name.lower() in sub_names:
                raise TopologyError(f"{where}: duplicate subscription name")
            sub_names.add(sub_name.lower())
            properties = _map_properties(subscription.get("Properties"), _SUBSCRIPTION_PROPERTIES, where)
            plan.append(PlannedOperation("subscription", (topic_name, sub_name), {"properties": properties}))
            for rule in subscription.get("Rules") or []:
                rule_name = _entity_name(rule, where)
                plan.append(
                    PlannedOperation(
                        "rule", (topic_name, sub_name, rule_name), _rule_body(rule, f"{where}/{rule_name}")
                    )
                )
    return plan


def format_plan(
    plan: Iterable[PlannedOperation], subscription_id: str, resource_group: str, namespace: str
) -> str:
    """Human-readable plan: one ``PUT path`` line per operation followed by its JSON body."""
    lines = []
    for op in plan:
        lines.append(
            f"PUT {op.arm_path(subscription_id, resource_group, namespace)}?api-version={API_VERSION}"
        )
        lines.append(json.dumps(op.body, indent=2, sort_keys=True))
    return "\n".join(lines)


def apply_plan(
    client: Any,
    resource_group: str,
    namespace: str,
    plan: Sequence[PlannedOperation],
    *,
    log: Callable[[str], None] = print,
) -> None:
    """Send each planned PUT through a ``ServiceBusManagementClient`` (or anything shaped like one)."""
    for op in plan:
        log(f"{op.kind:12} {namespace if op.kind == 'namespace' else op.name}")
        if op.kind == "namespace":
            client.namespaces.begin_create_or_update(resource_group, namespace, op.body).result()
        elif op.kind == "queue":
            client.queues.create_or_update(resource_group, namespace, op.names[0], op.body)
        elif op.kind == "topic":
            client.topics.create_or_update(resource_group, namespace, op.names[0], op.body)
        elif op.kind == "subscription":
            client.subscriptions.create_or_update(resource_group, namespace, *op.names, op.body)
        elif op.kind == "rule":
            client.rules.create_or_update(resource_group, namespace, *op.names, op.body)
        else:
            raise TopologyError(f"unknown operation kind {op.kind!r}")


class StaticBearerTokenPolicy(SansIOHTTPPolicy):
    """Sends one fixed bearer token on every request.

    For ARM-compatible endpoints that are not Azure (an emulator's management surface), where there is
    no Microsoft Entra ID to ask for a token.  Unlike azure-core's BearerTokenCredentialPolicy it allows
    plain http, which only makes sense on the loopback interface of a developer machine.
    """

    def __init__(self, token: str) -> None:
        super().__init__()
        self._token = token

    def on_request(self, request: Any) -> None:
        request.http_request.headers["Authorization"] = f"Bearer {self._token}"


def sas_bearer_token(resource_uri: str, key_name: str, key: str, ttl_s: int = 3600) -> str:
    """A Shared Access Signature for ``resource_uri`` (the namespace root), without the
    ``SharedAccessSignature`` prefix: the bearer token sbemulator's ARM surface verifies (HMAC-SHA256 of
    the url-encoded resource and the expiry, as Service Bus signs SAS tokens)."""
    expiry = int(time.time()) + ttl_s
    encoded = urllib.parse.quote_plus(resource_uri)
    digest = hmac.new(key.encode(), f"{encoded}\n{expiry}".encode(), hashlib.sha256).digest()
    signature = urllib.parse.quote_plus(base64.b64encode(digest).decode())
    return f"sr={encoded}&sig={signature}&se={expiry}&skn={key_name}"


class _UnusedCredential:
    """The client insists on a credential object; with a static token policy it is never asked."""

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        raise RuntimeError("the static bearer token policy should have been used")


def build_client(
    subscription_id: str,
    *,
    credential_kind: str = "default",
    token: str | None = None,
    base_url: str | None = None,
    transport: Any = None,
    ca_cert: str | None = None,
    sas_key_name: str = "RootManageSharedAccessKey",
    sas_key: str | None = None,
) -> Any:
    """A ServiceBusManagementClient pinned to :data:`API_VERSION`.

    ``credential_kind="default"`` uses DefaultAzureCredential (https only, as azure-core enforces);
    ``"sas"`` sends a token signed with ``sas_key`` for ``base_url`` (what an emulator can verify);
    ``"none"`` sends ``token`` as a static bearer token and also accepts a plain-http ``base_url``.
    ``ca_cert`` is a PEM file of CA certificates to trust for https (an emulator's own CA).
    """
    from azure.mgmt.servicebus import ServiceBusManagementClient

    kwargs: dict[str, Any] = {"api_version": API_VERSION, "polling_interval": 1}
    if transport is not None:
        kwargs["transport"] = transport
    if ca_cert:
        kwargs["connection_verify"] = ca_cert
    if credential_kind == "default":
        if base_url and not base_url.lower().startswith("https://"):
            raise ValueError("a non-https --base-url is only allowed with --credential none")
        from azure.identity import DefaultAzureCredential

        credential: Any = DefaultAzureCredential()
    elif credential_kind == "sas":
        if not base_url or not sas_key:
            raise ValueError("--credential sas needs --base-url and --sas-key (or SERVICEBUS_SAS_KEY)")
        credential = _UnusedCredential()
        root = base_url.rstrip("/") + "/"
        kwargs["authentication_policy"] = StaticBearerTokenPolicy(sas_bearer_token(root, sas_key_name, sas_key))
    elif credential_kind == "none":
        credential = _UnusedCredential()
        kwargs["authentication_policy"] = StaticBearerTokenPolicy(token or "emulator")
    else:
        raise ValueError(f"unknown credential kind {credential_kind!r}")
    return ServiceBusManagementClient(credential, subscription_id, base_url=base_url, **kwargs)


def _parser() -> argparse.ArgumentParser:
    env = os.environ.get
    parser = argparse.ArgumentParser(
        prog="provision.py",
        description="Create or update the Service Bus entities of servicebus.json through ARM.",
    )
    parser.add_argument("--topology", default=str(DEFAULT_TOPOLOGY), help="Config.json-style topology file")
    parser.add_argument(
        "--subscription-id", default=env("AZURE_SUBSCRIPTION_ID"), help="env AZURE_SUBSCRIPTION_ID"
    )
    parser.add_argument(
        "--resource-group", default=env("AZURE_RESOURCE_GROUP"), help="env AZURE_RESOURCE_GROUP"
    )
    parser.add_argument(
        "--namespace",
        default=env("SERVICEBUS_NAMESPACE_NAME"),
        help="the Azure namespace name (not the emulator's sbemulatorns); env SERVICEBUS_NAMESPACE_NAME",
    )
    parser.add_argument("--location", default=env("AZURE_LOCATION"), help="env AZURE_LOCATION")
    parser.add_argument(
        "--create-namespace",
        action="store_true",
        help="also create or update the namespace itself (needs --location)",
    )
    parser.add_argument("--sku", default="Standard", choices=["Standard", "Premium"], help="namespace SKU")
    parser.add_argument("--dry-run", action="store_true", help="print the planned PUTs and exit")
    parser.add_argument("--base-url", default=None, help="an alternative ARM endpoint, e.g. an emulator's")
    parser.add_argument(
        "--credential",
        choices=["default", "sas", "none"],
        default="default",
        help="'default': DefaultAzureCredential; 'sas': a token signed with the namespace key (--sas-key), "
        "what sbemulator verifies; 'none': a static bearer token (--token) for mocks",
    )
    parser.add_argument(
        "--token", default=env("ARM_BEARER_TOKEN"), help="the static token for --credential none"
    )
    parser.add_argument(
        "--sas-key-name", default=env("SERVICEBUS_SAS_KEY_NAME", "RootManageSharedAccessKey"),
        help="key name for --credential sas (env SERVICEBUS_SAS_KEY_NAME; default RootManageSharedAccessKey)",
    )
    parser.add_argument(
        "--sas-key", default=env("SERVICEBUS_SAS_KEY"),
        help="the key for --credential sas (env SERVICEBUS_SAS_KEY; sbemulator's default is SAS_KEY_VALUE)",
    )
    parser.add_argument(
        "--ca-cert", default=None, help="PEM CA certificate to trust for an https --base-url (an emulator's CA)"
    )
    return parser


def main(argv: Sequence[str] | None = None, *, transport: Any = None) -> int:
    """Command-line entry point; ``transport`` lets tests put a fake ARM under the real client."""
    parser = _parser()
    args = parser.parse_args(argv)
    missing = [
        flag
        for flag, value in (
            ("--subscription-id", args.subscription_id),
            ("--resource-group", args.resource_group),
            ("--namespace", args.namespace),
        )
        if not value
    ]
    if args.create_namespace and not args.location:
        missing.append("--location")
    if missing and not args.dry_run:
        parser.error("missing " + ", ".join(missing))
    try:
        topology = load_topology(args.topology)
        plan = plan_from_topology(
            topology,
            namespace_location=args.location if args.create_namespace else None,
            namespace_sku=args.sku,
        )
    except (OSError, TopologyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    subscription_id = args.subscription_id or "<subscription-id>"
    resource_group = args.resource_group or "<resource-group>"
    namespace = args.namespace or "<namespace>"
    if args.dry_run:
        print(format_plan(plan, subscription_id, resource_group, namespace))
        return 0
    try:
        client = build_client(
            subscription_id,
            credential_kind=args.credential,
            token=args.token,
            base_url=args.base_url,
            transport=transport,
            ca_cert=args.ca_cert,
            sas_key_name=args.sas_key_name,
            sas_key=args.sas_key,
        )
    except ValueError as exc:
        parser.error(str(exc))
    from azure.core.exceptions import HttpResponseError

    try:
        apply_plan(client, resource_group, namespace, plan)
    except HttpResponseError as exc:
        print(f"error: ARM refused the request: {exc.message}", file=sys.stderr)
        return 1
    print(f"applied {len(plan)} operations to {namespace}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
