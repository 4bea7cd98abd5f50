"""Client factories: a connection string for the emulators, a namespace/URI + Azure AD in Azure.

The credential is created only for identity-based settings, so local runs never touch Azure AD.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from azure.data.tables import TableServiceClient
from azure.servicebus import ServiceBusClient

from shared.settings import ServiceBusSettings, TableSettings

if TYPE_CHECKING:  # imported where used: only identity-based settings need them
    from azure.identity import DefaultAzureCredential
    from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient


def default_credential() -> DefaultAzureCredential:
    """DefaultAzureCredential: managed identity in Azure, the developer's login on a laptop."""
    from azure.identity import DefaultAzureCredential

    return DefaultAzureCredential()


def service_bus_client(
    settings: ServiceBusSettings, *, credential: Any = None, **kwargs: Any
) -> ServiceBusClient:
    if settings.connection_string:
        return ServiceBusClient.from_connection_string(settings.connection_string, **kwargs)
    if not settings.fully_qualified_namespace:
        raise ValueError("ServiceBusSettings needs a connection string or a fully qualified namespace")
    return ServiceBusClient(
        settings.fully_qualified_namespace, credential or default_credential(), **kwargs
    )


def async_service_bus_client(settings: ServiceBusSettings, *, credential: Any = None,
                             **kwargs: Any) -> AsyncServiceBusClient:
    """The asyncio flavour; the credential must then come from ``azure.identity.aio``."""
    from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient

    if settings.connection_string:
        return AsyncServiceBusClient.from_connection_string(settings.connection_string, **kwargs)
    if not settings.fully_qualified_namespace:
        raise ValueError("ServiceBusSettings needs a connection string or a fully qualified namespace")
    if credential is None:
        from azure.identity.aio import DefaultAzureCredential as AsyncDefaultAzureCredential

        credential = AsyncDefaultAzureCredential()
    return AsyncServiceBusClient(settings.fully_qualified_namespace, credential, **kwargs)


def table_service_client(
    settings: TableSettings, *, credential: Any = None, **kwargs: Any
) -> TableServiceClient:
    if settings.connection_string:
        return TableServiceClient.from_connection_string(settings.connection_string, **kwargs)
    if not settings.table_service_uri:
        raise ValueError("TableSettings needs a connection string or a table service URI")
    return TableServiceClient(
        settings.table_service_uri, credential=credential or default_credential(), **kwargs
    )
