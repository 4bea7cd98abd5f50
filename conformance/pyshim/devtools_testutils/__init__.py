"""The part of the Azure SDK's test utilities (``devtools_testutils``, not published as a package) that the
azure-servicebus live tests import, live mode only, mapped onto sbemulator.

What runs for real: the preparers create their entities through the emulator's management API and pass
the same keyword arguments the real ones do; ``get_credential`` returns a TokenCredential, as a live
run's Entra ID one, whose tokens are SAS tokens of the namespace's key (the emulator has no Entra ID).
What does nothing: recording, sanitizers and matchers (they serve the playback mode, which these runs
never use). Nothing here touches what a test asserts.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import time
import uuid
from collections.abc import Callable
from typing import Any

from azure.core.credentials import AccessToken

from . import sanitizers  # noqa: F401
from .sanitizers import (  # noqa: F401
    add_general_regex_sanitizer,
    add_oauth_response_sanitizer,
    add_remove_header_sanitizer,
    set_custom_default_matcher,
)

RESOURCE_GROUP_PARAM = "resource_group"


class AzureTestError(Exception):
    pass


class ReservedResourceNameError(AzureTestError):
    pass


class FakeResource:
    def __init__(self, name: str, id: str = "", **kwargs: Any) -> None:
        self.name = name
        self.id = id or name
        for key, value in kwargs.items():
            setattr(self, key, value)

    def __repr__(self) -> str:
        return f"FakeResource(name={self.name!r})"


def get_region_override(default: str = "westus") -> str:
    return os.environ.get("RESOURCE_REGION", default)


class _SasTokenCredential:
    """A TokenCredential (what ``get_credential`` hands a live run: Entra ID) whose tokens are SAS tokens
    of the namespace's RootManageSharedAccessKey for the whole namespace, which the emulator verifies:
    the SDK sends them to $cbs (as ``jwt``) and to the management API (``Bearer``), as it would Entra
    ID's. Both clients take it, where ServiceBusAdministrationClient refuses an AzureNamedKeyCredential
    (it calls ``get_token``)."""

    LIFETIME_S = 3600

    def __init__(self) -> None:
        namespace = os.environ["SERVICEBUS_FULLY_QUALIFIED_NAMESPACE"]
        self._resource = f"sb://{namespace}/"
        self._key_name, self._key = os.environ["SBCONF_KEY_NAME"], os.environ["SBCONF_KEY"]

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        from sbemulator.auth import sign

        expiry = int(time.time()) + self.LIFETIME_S
        return AccessToken(sign(self._resource, self._key_name, self._key, expiry), expiry)

    def close(self) -> None:
        pass


class _AsyncSasTokenCredential(_SasTokenCredential):
    """The same for the async clients (an AsyncTokenCredential)."""

    async def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:  # type: ignore[override]
        return _SasTokenCredential.get_token(self, *scopes, **kwargs)

    async def close(self) -> None:  # type: ignore[override]
        pass

    async def __aenter__(self) -> _AsyncSasTokenCredential:
        return self

    async def __aexit__(self, *args: Any) -> None:
        pass


def get_credential(*args: Any, is_async: bool = False, **kwargs: Any) -> _SasTokenCredential:
    """Where a live run gets an Entra ID credential: one whose tokens are the namespace's SAS tokens."""
    return _AsyncSasTokenCredential() if is_async else _SasTokenCredential()


def trim_kwargs(fn: Callable[..., Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments ``fn`` accepts (all of them when it takes ``**kwargs``), as the real
    preparers and ``recorded_by_proxy`` pass them."""
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return kwargs
    return {k: v for k, v in kwargs.items() if k in params}


class AzureRecordedTestCase:
    """Live mode: no recording."""

    is_live = True

    def create_random_name(self, name: str) -> str:
        return f"{name}{uuid.uuid4().hex[:8]}"

    def get_resource_name(self, name: str) -> str:
        return self.create_random_name(name)

    @staticmethod
    def await_prepared_test(test_fn: Callable[..., Any]) -> Callable[..., Any]:
        """An async test run to completion on an event loop of its own (the real helper's job)."""

        @functools.wraps(test_fn)
        def run(test_class_instance: Any, *args: Any, **kwargs: Any) -> Any:
            return asyncio.run(test_fn(test_class_instance, *args, **trim_kwargs(test_fn, kwargs)))
        return run

    def get_settings_value(self, key: str) -> str:
        return os.environ.get(f"AZURE_{key}", os.environ.get(key, ""))


class AzureMgmtRecordedTestCase(AzureRecordedTestCase):
    pass


class AzureMgmtPreparer:
    """A decorator that creates a resource before the test and removes it after, passing what
    ``create_resource`` returns as keyword arguments (the real AbstractPreparer's protocol)."""

    def __init__(self, name_prefix: str = "", random_name_length: int = 24, *args: Any,
                 random_name_enabled: bool = True, **kwargs: Any) -> None:
        self.name_prefix = name_prefix
        self.random_name_length = random_name_length
        self.random_name_enabled = random_name_enabled
        self.is_live = True
        self.resource_moniker = name_prefix
        self.test_class_instance: Any = None

    def set_cache(self, *args: Any) -> None:
        """Every test gets resources of its own (isolation over speed)."""

    def create_random_name(self) -> str:
        name = f"{self.name_prefix}{uuid.uuid4().hex}"
        return name[: max(self.random_name_length, len(self.name_prefix) + 8)].lower()

    @property
    def moniker(self) -> str:
        return self.resource_moniker

    def create_resource(self, name: str, **kwargs: Any) -> dict[str, Any]:
        return {}

    def remove_resource(self, name: str, **kwargs: Any) -> None:
        pass

    def provided(self) -> set[str]:
        """The keyword arguments this preparer passes (pytest must not look for fixtures of those names)."""
        return set()

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        preparer = self
        wrapper: Callable[..., Any]
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def _async_wrapper(test_class_instance: Any, **kwargs: Any) -> Any:
                name, merged = preparer._prepare(test_class_instance, kwargs)
                try:
                    return await fn(test_class_instance, **trim_kwargs(fn, merged))
                finally:
                    preparer._remove(name, merged)
            wrapper = _async_wrapper
        else:
            @functools.wraps(fn)
            def _wrapper(test_class_instance: Any, **kwargs: Any) -> Any:
                name, merged = preparer._prepare(test_class_instance, kwargs)
                try:
                    return fn(test_class_instance, **trim_kwargs(fn, merged))
                finally:
                    preparer._remove(name, merged)
            wrapper = _wrapper
        signature = inspect.signature(fn)
        provided = self.provided()
        setattr(wrapper, "__signature__", signature.replace(  # noqa: B010 - pytest reads it
            parameters=[p for p in signature.parameters.values() if p.name not in provided]))
        return wrapper

    def _prepare(self, test_class_instance: Any, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        self.test_class_instance = test_class_instance
        name = self.create_random_name()
        return name, {**kwargs, **self.create_resource(name, **kwargs)}

    def _remove(self, name: str, kwargs: dict[str, Any]) -> None:
        try:
            self.remove_resource(name, **kwargs)
        except Exception:
            pass


class _ResourceGroupPreparer(AzureMgmtPreparer):
    def __init__(self, name_prefix: str = "", *args: Any, parameter_name: str = RESOURCE_GROUP_PARAM,
                 parameter_name_for_location: str = "location", location: str = "westus", **kwargs: Any) -> None:
        super().__init__(name_prefix, 24)
        self.parameter_name = parameter_name
        self.parameter_name_for_location = parameter_name_for_location
        self.location = location

    def provided(self) -> set[str]:
        return {self.parameter_name, self.parameter_name_for_location}

    def create_resource(self, name: str, **kwargs: Any) -> dict[str, Any]:
        return {self.parameter_name: FakeResource(name=name, id=f"/resourceGroups/{name}"),
                self.parameter_name_for_location: self.location}


ResourceGroupPreparer = _ResourceGroupPreparer
CachedResourceGroupPreparer = _ResourceGroupPreparer
RandomNameResourceGroupPreparer = _ResourceGroupPreparer


class PowerShellPreparer(AzureMgmtPreparer):
    """Live mode: each keyword comes from the environment variable of its upper-cased name (as
    New-TestResources.ps1 sets them), the given value where the variable is unset."""

    def __init__(self, directory: str, **kwargs: Any) -> None:
        super().__init__("", 24)
        self.directory = directory
        self.fake_values = {k: v for k, v in kwargs.items() if k not in ("name_prefix", "preparers")}

    def create_random_name(self) -> str:
        return ""

    def provided(self) -> set[str]:
        return set(self.fake_values)

    def create_resource(self, name: str, **kwargs: Any) -> dict[str, Any]:
        return {key: os.environ.get(key.upper(), value) for key, value in self.fake_values.items()}


def recorded_by_proxy(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Live mode: the test runs as is (the real decorator records or plays back through a proxy)."""

    @functools.wraps(fn)
    def _wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **trim_kwargs(fn, kwargs))
    return _wrapper


def is_live() -> bool:
    return True
