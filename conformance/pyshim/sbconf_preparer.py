"""``servicebus_preparer`` for a run against sbemulator: the same names and keyword arguments as the
module of azure-servicebus's tests, with each entity created through the emulator's management API
(the SDK's own ServiceBusAdministrationClient over the namespace's shared access key) where the real
module goes through Azure Resource Manager, which the emulator serves only in part (no namespace
create, no listKeys). The conformance plugin puts this module in the tests' place before they import it.

Namespace-level authorization rules cannot be created at run time here; the runner's topology holds a
rule for each set of rights the tests ask for (RootManageSharedAccessKey for Manage, Send, Listen).
"""

from __future__ import annotations

import datetime
import functools
import os
from typing import Any

from azure.mgmt.servicebus.models import AccessRights
from azure.servicebus.management import AccessRights as AtomRights
from azure.servicebus.management import AuthorizationRule, ServiceBusAdministrationClient
from devtools_testutils import AzureMgmtPreparer, FakeResource  # type: ignore[import-not-found]

SERVICEBUS_DEFAULT_AUTH_RULE_NAME = "RootManageSharedAccessKey"
SERVICEBUS_NAMESPACE_PARAM = "servicebus_namespace"
SERVICEBUS_TOPIC_PARAM = "servicebus_topic"
SERVICEBUS_SUBSCRIPTION_PARAM = "servicebus_subscription"
SERVICEBUS_QUEUE_PARAM = "servicebus_queue"
SERVICEBUS_AUTHORIZATION_RULE_PARAM = "servicebus_authorization_rule"
SERVICEBUS_QUEUE_AUTHORIZATION_RULE_PARAM = "servicebus_queue_authorization_rule"
SERVICEBUS_ENDPOINT_SUFFIX = os.environ.get("SERVICEBUS_ENDPOINT_SUFFIX", ".servicebus.windows.net")
RESOURCE_GROUP_PARAM = "resource_group"
LOCATION = "westus"

# The runner's topology: one namespace rule per set of rights (names and keys in the environment).
_RULES_BY_RIGHTS = {
    frozenset({"Manage", "Send", "Listen"}): "SBCONF_KEY",
    frozenset({"Listen"}): "SBCONF_LISTEN_KEY",
    frozenset({"Send"}): "SBCONF_SEND_KEY",
    frozenset({"Send", "Listen"}): "SBCONF_NOMANAGE_KEY",
}


def namespace_name() -> str:
    return os.environ["SBCONF_NAMESPACE"]


def namespace_host() -> str:
    return f"{namespace_name()}{SERVICEBUS_ENDPOINT_SUFFIX}"


def connection_string(key_name: str, key: str, entity: str | None = None) -> str:
    text = f"Endpoint=sb://{namespace_host()}/;SharedAccessKeyName={key_name};SharedAccessKey={key}"
    return text + (f";EntityPath={entity}" if entity else "")


def admin_client() -> ServiceBusAdministrationClient:
    return ServiceBusAdministrationClient.from_connection_string(
        connection_string(os.environ["SBCONF_KEY_NAME"], os.environ["SBCONF_KEY"]))


def _rights_names(rights: Any) -> frozenset[str]:
    return frozenset(str(getattr(r, "value", r)).capitalize() for r in rights)


def _duration(value: Any) -> Any:
    if isinstance(value, str) and value.startswith("PT") and value.endswith("S"):
        return datetime.timedelta(seconds=float(value[2:-1]))
    return value


class _Preparer(AzureMgmtPreparer):
    def __init__(self, name_prefix: str = "", use_cache: bool = False, parameter_name: str = "",
                 **kwargs: Any) -> None:
        super().__init__(name_prefix, 24)
        self.parameter_name = parameter_name
        self.options = kwargs

    def provided(self) -> set[str]:
        return {self.parameter_name, *(f"{self.parameter_name}_{suffix}" for suffix in
                                       ("connection_string", "key_name", "primary_key")),
                getattr(self, "parameter_name_for_location", "location")}

    def create_random_name(self) -> str:
        # Entity names: letters, digits, '-', '.', '_'; the tests' prefixes fit.
        return super().create_random_name().replace("_", "-")


class ServiceBusResourceGroupPreparer(_Preparer):
    def __init__(self, name_prefix: str = "", use_cache: bool = False,
                 parameter_name: str = RESOURCE_GROUP_PARAM, parameter_name_for_location: str = "location",
                 **kwargs: Any) -> None:
        super().__init__(name_prefix, use_cache, parameter_name)
        self.parameter_name_for_location = parameter_name_for_location

    def create_resource(self, name: str, **kwargs: Any) -> dict[str, Any]:
        return {self.parameter_name: FakeResource(name=f"rgpy-{name}"), self.parameter_name_for_location: LOCATION}


class ServiceBusNamespacePreparer(_Preparer):
    """The emulator's namespace (there is one); its RootManageSharedAccessKey."""

    def __init__(self, name_prefix: str = "", use_cache: bool = False, sku: str = "Standard",
                 parameter_name: str = SERVICEBUS_NAMESPACE_PARAM, **kwargs: Any) -> None:
        super().__init__(name_prefix, use_cache, parameter_name)
        self.sku = sku

    def create_resource(self, name: str, **kwargs: Any) -> dict[str, Any]:
        key_name, key = os.environ["SBCONF_KEY_NAME"], os.environ["SBCONF_KEY"]
        return {
            self.parameter_name: FakeResource(name=namespace_name(), id=namespace_name()),
            f"{self.parameter_name}_connection_string": connection_string(key_name, key),
            f"{self.parameter_name}_key_name": key_name,
            f"{self.parameter_name}_primary_key": key,
        }


class ServiceBusTopicPreparer(_Preparer):
    def __init__(self, name_prefix: str = "", use_cache: bool = False, parameter_name: str = SERVICEBUS_TOPIC_PARAM,
                 **kwargs: Any) -> None:
        super().__init__(name_prefix, use_cache, parameter_name)

    def create_resource(self, name: str, **kwargs: Any) -> dict[str, Any]:
        with admin_client() as mgmt:
            mgmt.create_topic(name)
        return {self.parameter_name: FakeResource(name=name)}

    def remove_resource(self, name: str, **kwargs: Any) -> None:
        with admin_client() as mgmt:
            mgmt.delete_topic(name)


class ServiceBusSubscriptionPreparer(_Preparer):
    def __init__(self, name_prefix: str = "", use_cache: bool = False,
                 parameter_name: str = SERVICEBUS_SUBSCRIPTION_PARAM,
                 servicebus_topic_parameter_name: str = SERVICEBUS_TOPIC_PARAM, requires_session: bool = False,
                 lock_duration: str = "PT60S", **kwargs: Any) -> None:
        super().__init__(name_prefix, use_cache, parameter_name)
        self.topic_parameter_name = servicebus_topic_parameter_name
        self.requires_session = requires_session
        self.lock_duration = lock_duration

    def create_resource(self, name: str, **kwargs: Any) -> dict[str, Any]:
        topic = kwargs[self.topic_parameter_name].name
        with admin_client() as mgmt:
            mgmt.create_subscription(topic, name, requires_session=self.requires_session,
                                     lock_duration=_duration(self.lock_duration))
        return {self.parameter_name: FakeResource(name=name)}


class ServiceBusQueuePreparer(_Preparer):
    def __init__(self, name_prefix: str = "", use_cache: bool = False,
                 requires_duplicate_detection: bool = False, dead_lettering_on_message_expiration: bool = False,
                 requires_session: bool = False, lock_duration: str = "PT30S", enable_partitioning: bool = False,
                 parameter_name: str = SERVICEBUS_QUEUE_PARAM, **kwargs: Any) -> None:
        super().__init__(name_prefix, use_cache, parameter_name)
        self.properties = dict(
            requires_duplicate_detection=requires_duplicate_detection,
            dead_lettering_on_message_expiration=dead_lettering_on_message_expiration,
            requires_session=requires_session, lock_duration=_duration(lock_duration),
            enable_partitioning=enable_partitioning,
        )

    def create_resource(self, name: str, **kwargs: Any) -> dict[str, Any]:
        with admin_client() as mgmt:
            mgmt.create_queue(name, **self.properties)
        return {self.parameter_name: FakeResource(name=name)}

    def remove_resource(self, name: str, **kwargs: Any) -> None:
        with admin_client() as mgmt:
            mgmt.delete_queue(name)


class ServiceBusNamespaceAuthorizationRulePreparer(_Preparer):
    def __init__(self, name_prefix: str = "", use_cache: bool = False,
                 access_rights: Any = (AccessRights.manage, AccessRights.send, AccessRights.listen),
                 parameter_name: str = SERVICEBUS_AUTHORIZATION_RULE_PARAM, **kwargs: Any) -> None:
        super().__init__(name_prefix, use_cache, parameter_name)
        self.access_rights = access_rights

    def create_resource(self, name: str, **kwargs: Any) -> dict[str, Any]:
        variable = _RULES_BY_RIGHTS[_rights_names(self.access_rights)]
        key_name, key = os.environ[f"{variable}_NAME"], os.environ[variable]
        return {self.parameter_name: FakeResource(name=key_name),
                f"{self.parameter_name}_connection_string": connection_string(key_name, key)}


class ServiceBusQueueAuthorizationRulePreparer(_Preparer):
    def __init__(self, name_prefix: str = "", use_cache: bool = False,
                 access_rights: Any = (AccessRights.manage, AccessRights.send, AccessRights.listen),
                 parameter_name: str = SERVICEBUS_QUEUE_AUTHORIZATION_RULE_PARAM,
                 servicebus_queue_parameter_name: str = SERVICEBUS_QUEUE_PARAM, **kwargs: Any) -> None:
        super().__init__(name_prefix, use_cache, parameter_name)
        self.access_rights = access_rights
        self.queue_parameter_name = servicebus_queue_parameter_name

    def create_resource(self, name: str, **kwargs: Any) -> dict[str, Any]:
        queue = kwargs[self.queue_parameter_name].name
        rights = [getattr(AtomRights, r.upper()) for r in sorted(_rights_names(self.access_rights))]
        rule = AuthorizationRule(key_name=name, rights=rights)
        with admin_client() as mgmt:
            props = mgmt.get_queue(queue)
            props.authorization_rules = [*(props.authorization_rules or []), rule]
            mgmt.update_queue(props)
            stored = next(r for r in mgmt.get_queue(queue).authorization_rules or [] if r.key_name == name)
        return {self.parameter_name: FakeResource(name=name),
                f"{self.parameter_name}_connection_string": connection_string(name, str(stored.primary_key), queue)}


CachedServiceBusResourceGroupPreparer = functools.partial(ServiceBusResourceGroupPreparer, use_cache=True)
CachedServiceBusNamespacePreparer = functools.partial(ServiceBusNamespacePreparer, use_cache=True)
CachedServiceBusQueuePreparer = functools.partial(ServiceBusQueuePreparer, use_cache=True)
CachedServiceBusTopicPreparer = functools.partial(ServiceBusTopicPreparer, use_cache=True)
CachedServiceBusSubscriptionPreparer = functools.partial(ServiceBusSubscriptionPreparer, use_cache=True)
