"""devhost settings: host.json, TimeSpans, local.settings.json and the environment, app-setting references."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from devhost.config import (
    HOST_OVERRIDE_PREFIX,
    HostSettings,
    ServiceBusOptions,
    load_host_json,
    load_local_settings,
    parse_timespan,
)
from shared.settings import SettingsError

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("text", "expected"), [
    ("00:05:00", timedelta(minutes=5)),
    ("00:00:00.80", timedelta(milliseconds=800)),
    ("00:00:30", timedelta(seconds=30)),
    ("1.02:03:04", timedelta(days=1, hours=2, minutes=3, seconds=4)),
    ("00:00:00.0000001", timedelta(microseconds=0.1)),
])
def test_timespans(text: str, expected: timedelta) -> None:
    assert parse_timespan(text) == expected


@pytest.mark.parametrize("text", ["5 minutes", "00:61:00", "25:00:00", "1:2", "", "PT5M"])
def test_bad_timespans_are_rejected(text: str) -> None:
    with pytest.raises(ValueError):
        parse_timespan(text)


def test_the_repository_host_json() -> None:
    host = load_host_json(ROOT / "host.json")
    sb = host.service_bus
    assert sb == ServiceBusOptions(
        max_concurrent_calls=16, prefetch_count=0, auto_complete_messages=True,
        max_auto_lock_renewal_duration=timedelta(minutes=5), max_concurrent_sessions=8,
        session_idle_timeout=timedelta(seconds=30), max_message_batch_size=100,
    )
    assert host.function_timeout == timedelta(minutes=5)


def test_defaults_for_what_host_json_leaves_out(tmp_path: Path) -> None:
    path = tmp_path / "host.json"
    path.write_text(json.dumps({"version": "2.0", "extensions": {"serviceBus": {"maxConcurrentCalls": 3}}}))
    sb = load_host_json(path).service_bus
    assert sb.max_concurrent_calls == 3
    assert sb.auto_complete_messages is True and sb.prefetch_count == 0 and sb.max_concurrent_sessions == 8


@pytest.mark.parametrize(("document", "message"), [
    ({"version": "1.0"}, "version must be"),
    ({"version": "2.0", "extensions": {"serviceBus": {"maxConcurrentCalls": 0}}}, "maxConcurrentCalls"),
    ({"version": "2.0", "extensions": {"serviceBus": {"autoCompleteMessages": "maybe"}}}, "autoCompleteMessages"),
    ({"version": "2.0", "extensions": {"serviceBus": {"maxAutoLockRenewalDuration": "5m"}}},
     "maxAutoLockRenewalDuration"),
])
def test_host_json_errors_name_the_setting(tmp_path: Path, document: dict, message: str) -> None:
    path = tmp_path / "host.json"
    path.write_text(json.dumps(document))
    with pytest.raises(SettingsError, match=message):
        load_host_json(path)


def test_missing_or_broken_host_json(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="not found"):
        load_host_json(tmp_path / "host.json")
    (tmp_path / "host.json").write_text("{")
    with pytest.raises(SettingsError, match="not valid JSON"):
        load_host_json(tmp_path / "host.json")


def test_app_settings_override_host_json_case_insensitively() -> None:
    base = ServiceBusOptions(max_concurrent_calls=16)
    changed = base.with_overrides({f"{HOST_OVERRIDE_PREFIX}maxconcurrentcalls": "2",
                                   f"{HOST_OVERRIDE_PREFIX}autoCompleteMessages": "false",
                                   "UNRELATED": "x"})
    assert changed.max_concurrent_calls == 2 and changed.auto_complete_messages is False
    assert changed.prefetch_count == base.prefetch_count
    with pytest.raises(SettingsError, match=r"app setting: serviceBus\.maxConcurrentCalls"):
        base.with_overrides({f"{HOST_OVERRIDE_PREFIX}maxConcurrentCalls": "many"})


def test_environment_overrides_local_settings(tmp_path: Path) -> None:
    path = tmp_path / "local.settings.json"
    path.write_text(json.dumps({"IsEncrypted": False, "Values": {"A": "local", "B": "local", "N": 3}}))
    settings = HostSettings.load(path, env={"B": "env", "C": "env"})
    assert (settings.get("A"), settings.get("B"), settings.get("C"), settings.get("N")) == ("local", "env", "env", "3")
    settings.set("A", "derived")
    assert settings.get("A") == "derived"
    assert settings.get("MISSING") is None


def test_blank_environment_value_does_not_hide_the_local_one(tmp_path: Path) -> None:
    path = tmp_path / "local.settings.json"
    path.write_text(json.dumps({"Values": {"A": "local"}}))
    assert HostSettings.load(path, env={"A": "  "}).get("A") == "local"


def test_local_settings_file_errors(tmp_path: Path) -> None:
    assert load_local_settings(tmp_path / "absent.json") == {}
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(SettingsError, match="not valid JSON"):
        load_local_settings(bad)
    bad.write_text(json.dumps({"Values": [1, 2]}))
    with pytest.raises(SettingsError, match="'Values' must be an object"):
        load_local_settings(bad)


def test_app_setting_references_resolve_or_name_the_missing_setting() -> None:
    settings = HostSettings(local={"SENDER_SCHEDULE": "*/5 * * * * *"}, env={})
    assert settings.resolve("%SENDER_SCHEDULE%", "function sender") == "*/5 * * * * *"
    assert settings.resolve("plain", "x") == "plain"
    with pytest.raises(SettingsError, match=r"function other refers to app setting %NOPE% which is not set"):
        settings.resolve("%NOPE%", "function other")


# "host.json settings" of the Service Bus extension 5.x (Azure Service Bus bindings for Azure Functions):
# maxMessageBatchSize 1000, minMessageBatchSize 1, maxBatchWaitTime 00:00:30 when absent; the minimum
# must not exceed the maximum, and the wait may be at most half of the longest lock (00:02:30).
def test_batch_settings_have_the_documented_defaults() -> None:
    options = ServiceBusOptions.from_mapping({})
    assert (options.max_message_batch_size, options.min_message_batch_size, options.max_batch_wait_time) == (
        1000, 1, timedelta(seconds=30))


def test_batch_settings_are_read_from_host_json() -> None:
    options = ServiceBusOptions.from_mapping(
        {"maxMessageBatchSize": 20, "minMessageBatchSize": 10, "maxBatchWaitTime": "00:00:01"})
    assert (options.max_message_batch_size, options.min_message_batch_size, options.max_batch_wait_time) == (
        20, 10, timedelta(seconds=1))


@pytest.mark.parametrize(("raw", "named"), [
    ({"maxMessageBatchSize": 5, "minMessageBatchSize": 6}, "minMessageBatchSize"),
    ({"maxBatchWaitTime": "00:02:31"}, "maxBatchWaitTime"),
    ({"minMessageBatchSize": 0}, "minMessageBatchSize"),
    ({"maxConcurrentCalls": True}, "maxConcurrentCalls"),
    ({"prefetchCount": 1.5}, "prefetchCount"),
])
def test_inconsistent_batch_and_count_settings_are_reported(raw: dict, named: str) -> None:
    with pytest.raises(SettingsError, match=named):
        ServiceBusOptions.from_mapping(raw, source="host.json")


# local.settings.json (Azure Functions Core Tools docs, "Local settings file"): "Values must be strings and
# not JSON objects or arrays"; IsEncrypted true means values encrypted with a key of the machine.
@pytest.mark.parametrize(("doc", "named"), [
    ({"IsEncrypted": False, "Values": {"Nested": {"a": 1}}}, "Values.Nested"),
    ({"Values": {"A": "x", "List": [1, 2]}}, "Values.List"),
    ({"IsEncrypted": True, "Values": {"A": "ciphertext"}}, "IsEncrypted"),
    (["not", "an", "object"], "JSON object"),
])
def test_local_settings_that_are_not_plain_strings_are_reported(tmp_path: Path, doc: object, named: str) -> None:
    path = tmp_path / "local.settings.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(SettingsError, match=named):
        load_local_settings(path)


def test_local_settings_scalars_become_strings(tmp_path: Path) -> None:
    path = tmp_path / "local.settings.json"
    path.write_text(json.dumps({"IsEncrypted": False, "Values": {"A": "x", "N": 5, "Empty": None}}))
    assert load_local_settings(path) == {"A": "x", "N": "5", "Empty": ""}
