"""The running namespaces of one emulator (docs/emulator.md, "Several namespaces").

The command line and ``Emulator`` both hold one :class:`NamespaceGroup`: it starts the config file's
namespaces (the first with the emulator's own ports and data directory, the others on free ports with
their own stores, runtime/namespaces.py), adds and removes namespaces while the emulator runs, keeps
them by case-insensitive name and on one clock (an advance through any moves all), and stops them
newest first. Every namespace is built by the one composition root, runtime/composition.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ..config import NamespaceConfig
from ..gateway.faults import Faults
from .composition import NamespaceOptions, NamespaceRuntime, compose
from .server import AmqpServer


class NamespaceGroup:
    """Namespaces by lower-case name, in start order; the first is the emulator's own."""

    def __init__(self) -> None:
        self._by_name: dict[str, NamespaceRuntime] = {}
        self.clock_group: list[AmqpServer] = []  # every namespace's server: one advance moves all

    async def start(self, configs: Iterable[NamespaceConfig], options: NamespaceOptions, *,
                    faults: Faults | None = None) -> NamespaceRuntime:
        """Start every namespace of a file: the first with ``options`` (and ``faults``, when given), the
        others with ``options.for_namespace``. Nothing is left running when one fails."""
        first, *others = configs
        try:
            runtime = await self.add(first, options, faults=faults)
            for config in others:
                await self.add(config, options.for_namespace(config.name, options.sas_key))
        except BaseException:
            await self.stop()
            raise
        return runtime

    async def add(self, config: NamespaceConfig, options: NamespaceOptions, *,
                  faults: Faults | None = None) -> NamespaceRuntime:
        """Compose and start one namespace (sharing the first one's TLS and management bounds).
        ValueError when the group already has one by that name (names are case-insensitive)."""
        if config.name.lower() in self._by_name:
            raise ValueError(f"the emulator already has a namespace named {config.name!r}")
        runtime = compose(config, options, faults=faults)
        first = self.first if self._by_name else None
        await runtime.start(like=None if first is None else first.admin)
        runtime.join_clock(self.clock_group)
        self._by_name[config.name.lower()] = runtime
        return runtime

    async def remove(self, name: str) -> None:
        """Stop a namespace added after the first and free what it held (a durable one's files stay)."""
        runtime = self.get(name)
        if runtime is self.first:
            raise ValueError("the emulator's first namespace cannot be removed: stop the emulator")
        del self._by_name[name.lower()]
        await runtime.stop()

    async def stop(self) -> None:
        """Stop every namespace, newest first (the first one last, its store after its last commit)."""
        failure: BaseException | None = None
        while self._by_name:
            _, runtime = self._by_name.popitem()
            try:
                await runtime.stop()
            except Exception as exc:  # e.g. a full disk at the last commit: the others still stop
                failure = failure or exc
        if failure is not None:
            raise failure

    @property
    def first(self) -> NamespaceRuntime:
        return next(iter(self._by_name.values()))

    def get(self, name: str | None = None) -> NamespaceRuntime:
        """A namespace by name (case-insensitive; None: the first). KeyError naming the known ones."""
        if name is None:
            return self.first
        try:
            return self._by_name[name.lower()]
        except KeyError:
            known = ", ".join(runtime.name for runtime in self._by_name.values())
            raise KeyError(f"no namespace {name!r} in this emulator (it has: {known})") from None

    def __contains__(self, name: str) -> bool:
        return name.lower() in self._by_name

    def __iter__(self) -> Iterator[NamespaceRuntime]:
        return iter(list(self._by_name.values()))

    def __len__(self) -> int:
        return len(self._by_name)
