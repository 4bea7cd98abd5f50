from __future__ import annotations

import pytest

from shared.settings import ROLES, SettingsError, load_app, load_service_bus, load_table, parse_roles

FQNS = "ns.servicebus.windows.net"


def test_service_bus_prefers_the_connection_string() -> None:
    settings = load_service_bus({"ServiceBusConnection": "Endpoint=sb://x/;SharedAccessKeyName=a;SharedAccessKey=b",
                                 "ServiceBusConnection__fullyQualifiedNamespace": FQNS})
    assert settings.connection_string and not settings.uses_identity


def test_service_bus_identity_based() -> None:
    settings = load_service_bus({"ServiceBusConnection__fullyQualifiedNamespace": FQNS})
    assert settings.uses_identity and settings.fully_qualified_namespace == FQNS


def test_missing_service_bus_names_both_settings() -> None:
    with pytest.raises(SettingsError) as info:
        load_service_bus({"ServiceBusConnection": "  "})
    assert "ServiceBusConnection" in str(info.value)
    assert "ServiceBusConnection__fullyQualifiedNamespace" in str(info.value)


def test_table_settings() -> None:
    assert load_table({"TableStorageConnection": "UseDevelopmentStorage=true"}).table_name == "results"
    uri = load_table({"TableStorageConnection__tableServiceUri": "https://a.table.core.windows.net",
                      "RESULTS_TABLE": "leveled"})
    assert uri.uses_identity and uri.table_name == "leveled"
    with pytest.raises(SettingsError, match="TableStorageConnection__tableServiceUri"):
        load_table({})
    with pytest.raises(SettingsError, match="RESULTS_TABLE"):
        load_table({"TableStorageConnection": "x", "RESULTS_TABLE": "no-dashes"})


def test_app_defaults() -> None:
    app = load_app({})
    assert app.roles == ROLES
    assert app.sender_schedule == "0,30 * * * * *"
    assert app.sender_batch_size == 10
    assert app.leveler_budget_table == "writebudget"


def test_the_budget_table_name_is_checked() -> None:
    assert load_app({"LEVELER_BUDGET_TABLE": "budget2"}).leveler_budget_table == "budget2"
    with pytest.raises(SettingsError, match="LEVELER_BUDGET_TABLE"):
        load_app({"LEVELER_BUDGET_TABLE": "no-dashes"})


@pytest.mark.parametrize(("name", "value"), [("SENDER_BATCH_SIZE", "ten"), ("LEVELER_MAX_WRITES_PER_SECOND", "0"),
                                             ("LEVELER_MAX_WRITES_PER_SECOND", "-1"),
                                             ("CONSUMER_WORK_MS_HIGH", "-5")])
def test_bad_numbers_name_the_setting(name: str, value: str) -> None:
    with pytest.raises(SettingsError, match=name):
        load_app({name: value})


def test_roles() -> None:
    assert parse_roles(None) == ROLES
    assert parse_roles("") == ROLES
    assert parse_roles("leveler,leveler, sender") == ("leveler", "sender")
    with pytest.raises(SettingsError, match="'nope'"):
        parse_roles("sender,nope")


def test_ordered_writer_settings() -> None:
    app = load_app({})
    assert (app.ordered_table, app.ordered_work_ms) == ("orderedwrites", 0)
    app = load_app({"ORDERED_TABLE": "tenantledger", "ORDERED_WORK_MS": "25"})
    assert (app.ordered_table, app.ordered_work_ms) == ("tenantledger", 25)
    with pytest.raises(SettingsError, match="ORDERED_TABLE"):
        load_app({"ORDERED_TABLE": "ab"})  # Table Storage needs 3-63 characters
    with pytest.raises(SettingsError, match="ORDERED_WORK_MS"):
        load_app({"ORDERED_WORK_MS": "-1"})
    assert "ordered" in parse_roles("ordered")
