"""The asyncio server: sockets in, gateways (one per connection), one broker, one store.

Everything runs on one event loop thread, so the broker needs no locks. Durability uses group
commit: input from any number of connections is processed, the store commits once, and only then
are the accepts written back (a flush is always preceded by a commit).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time

from ..auth import SasValidator
from ..broker.api import BrokerAPI
from ..broker.clock import Clock, ManualClock
from ..broker.errors import BrokerError, QuotaExceededError, ServerBusyError
from ..broker.transactions import DEFAULT_TIMEOUT_S as DEFAULT_TRANSACTION_TIMEOUT_S
from ..gateway.core import Gateway
from ..gateway.faults import Faults
from ..gateway.limits import DEFAULT_LIMITS, Limits
from ..net.listener import ProtocolFactory, Routes, SniffingListener
from ..net.sniff import Protocol
from ..scheduling import DEFAULT_SLICES, Slices
from ..store.base import FULL, PROCESS, Store, StoreError
from .background import EntityCleanup, StoreFolds, TimerRun
from .collector import Collector
from .jobs import JobDriver

log = logging.getLogger("sbemulator")

READ_BUFFER_SIZE = 256 * 1024  # what asyncio reads at most per call with a plain Protocol


class _AmqpProtocol(asyncio.BufferedProtocol):
    """One connection. Reads land in the server's one receive buffer (``recv_into``): a plain
    ``Protocol`` gets a fresh 256 KiB ``bytes`` per read, which costs an mmap, an mremap and a
    munmap for every small frame a client sends. One buffer serves every connection because each
    read is handed to the gateway, which copies what it keeps, before the loop reads again."""

    def __init__(self, server: AmqpServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.gateway: Gateway | None = None
        self._flush_scheduled = False
        self._receiving = False  # inside data_received, which flushes when it is done
        self._timer: asyncio.TimerHandle | None = None
        self._heartbeats_known = False
        self._held = False  # a latency fault holds this connection's output (hold_output)
        self._input_backlog = False  # the gateway is handling this connection's input in slices

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport's interface without subclassing it.
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        loop = self.server.loop
        limits = self.server.limits
        # Backpressure (pause_writing/resume_writing below): asyncio calls pause_writing once the
        # transport's buffer passes the high-water mark and resume_writing once it is below the low one.
        transport.set_write_buffer_limits(high=limits.write_high_water, low=limits.write_low_water)  # type: ignore[attr-defined]
        self.gateway = Gateway(
            self.server.broker,
            self.server.validator,
            request_flush=self.request_flush,
            call_later=loop.call_later,
            max_frame_size=self.server.max_frame_size,
            idle_timeout_ms=self.server.idle_timeout_ms,
            transaction_timeout_s=self.server.transaction_timeout_s,
            peer=str(peer),
            limits=limits,
            slices=self.server.slices,
            over_capacity=len(self.server.connections) >= limits.max_connections,
            faults=self.server.faults,
            hold_output=self.hold_output,
            abort=self.abort,
            pause_input=self.pause_input,
            jobs=self.server.jobs,
        )
        self.gateway.commit_window = self.server.commit_window
        if self.server.store_writes:  # a store that keeps nothing always has room for a settlement
            self.gateway.settle_room = self.server.settle_room
        self.server.connections.add(self)
        self._arm_timer()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.server.read_buffer

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(self.server.read_buffer[:nbytes])

    def data_received(self, data: bytes | memoryview) -> None:
        gateway = self.gateway
        if gateway is None:
            return
        self.server.reads += 1
        self._receiving = True
        try:
            gateway.receive_data(data)
        finally:
            self._receiving = False
        self.flush()  # commit, then answer: no extra loop iteration on the request/response path
        if not self._heartbeats_known:
            wanted = gateway.wants_heartbeats()  # None until the peer's open arrived; asked once after
            if wanted is not None:
                self._heartbeats_known = True
                if wanted:  # the peer's open announced an idle timeout: heartbeats are due before our check
                    self._arm_timer()

    def request_flush(self, _gateway: Gateway | None = None) -> None:
        # A flush asked for while handling input is the one data_received ends with; scheduling
        # another would cost a loop iteration (and an epoll call) per request for nothing.
        if not self._flush_scheduled and not self._receiving:
            self._flush_scheduled = True
            self.server.loop.call_soon(self.flush)

    def flush(self) -> None:
        """Commit, then write what this connection produced. With group commit (``full`` durability)
        the connection joins the loop turn's group instead: one commit, one fsync, for every connection
        that had input in this turn (AmqpServer.join_group)."""
        self._flush_scheduled = False
        if self.server.group_commit:
            self.server.join_group(self)
            return
        gateway = self.gateway
        if gateway is None or self.transport is None:
            return
        if gateway.pump_pending:
            gateway.run_pending()
        self.write_out(self.server.commit_flush())

    def write_out(self, failure: BrokerError | StoreError | None) -> None:
        """After the commit: this connection's sends settled with its outcome, then its output written.
        ``failure`` an unsynced StoreError: nothing of the commit may be confirmed, so the connection is
        dropped with its output unwritten (its client retries what it did not see confirmed)."""
        gateway = self.gateway
        transport = self.transport
        if gateway is None or transport is None:
            return
        if isinstance(failure, StoreError):
            gateway.take_output()
            transport.abort()
            return
        if gateway.sends:
            gateway.settle_sends(failure)  # accepted now that they are stored, or refused and taken back
        if self._held:
            return  # a latency fault: written when the hold ends
        out = gateway.take_output()
        if out and not transport.is_closing():
            transport.write(out)  # may call pause_writing, before it returns
        if gateway.connection_closed:
            transport.close()
        elif gateway.blocked:
            gateway.unblock()  # receivers stopped at the output's high-water mark; written and not paused

    def hold_output(self, seconds: float) -> None:
        """A latency fault: nothing this connection produces is written, and nothing more is read from
        it, for ``seconds`` (real time); then everything goes out in order."""
        if self._held or self.transport is None or self.transport.is_closing():
            return
        self._held = True
        self.transport.pause_reading()
        self.server.loop.call_later(seconds, self._release_hold)

    def _release_hold(self) -> None:
        self._held = False
        if self.transport is not None and not self.transport.is_closing():
            if not self._input_backlog:
                self.transport.resume_reading()
            self.flush()

    def pause_input(self, paused: bool) -> None:
        """The gateway handles what this connection sent in slices: read nothing more until it is done
        (reading resumes unless a latency fault or the write buffer's high-water mark holds it too)."""
        self._input_backlog = paused
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if paused:
            transport.pause_reading()
        elif not self._held and not (self.gateway is not None and self.gateway.write_paused):
            transport.resume_reading()

    def abort(self) -> None:
        """A dropped-connection fault: the socket closes without a close frame (asyncio then calls
        connection_lost, which ends the gateway as for any lost connection)."""
        if self.transport is not None:
            self.transport.abort()

    def pause_writing(self) -> None:
        """The peer does not read as fast as we write: stop producing (and reading, so a peer that never
        reads cannot make us buffer answers to its requests either) until the buffer drains."""
        if self.gateway is not None:
            self.gateway.pause_writing()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        if (self.transport is not None and not self.transport.is_closing() and not self._held
                and not self._input_backlog):
            self.transport.resume_reading()
        if self.gateway is not None:
            self.gateway.resume_writing()

    def _arm_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        gateway = self.gateway
        if gateway is None or gateway.connection_closed:
            return
        deadline = gateway.next_timer()
        if deadline is not None:
            delay = max(0.05, deadline - time.monotonic())
            self._timer = self.server.loop.call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self.gateway is None:
            return
        self.gateway.on_timer()
        self.flush()
        self._arm_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.server.connections.discard(self)
        if self.gateway is not None:
            self.gateway.connection_lost()
            self.server.commit()
        self.gateway = None
        self.transport = None


class AmqpServer:
    """Listens for AMQP connections and runs the broker's timers."""

    def __init__(
        self,
        broker: BrokerAPI,
        store: Store,
        validator: SasValidator,
        *,
        host: str = "127.0.0.1",
        port: int = 5672,
        max_frame_size: int = 1024 * 1024,
        idle_timeout_ms: int | None = 240_000,
        limits: Limits = DEFAULT_LIMITS,
        transaction_timeout_s: float = DEFAULT_TRANSACTION_TIMEOUT_S,
        clock: Clock = time.time,
        faults: Faults | None = None,
        one_port: bool = True,
        slices: Slices = DEFAULT_SLICES,
    ) -> None:
        self.broker = broker
        # One port for everything (docs/emulator.md, "One port"): the AMQP port also serves AMQP over TLS,
        # and, once serve_http() is told where, HTTP and HTTPS (management, WebSockets), told apart by
        # each connection's first bytes. False: a plain AMQP listener, nothing else on the port.
        self.one_port = one_port
        self._listener: SniffingListener | None = None
        # The broker's clock (broker/clock.py): what its timers are measured by. Connection-level
        # timers (auth deadline, idle timeout, heartbeats, transaction timeouts) stay on real time.
        self.clock = clock
        self.limits = limits
        self.store = store
        self.store_writes = store.writes  # False: commit, ensure_room, fold_due are skipped (Store.writes)
        self.store_failing: StoreError | None = None  # the last commit's error while the store cannot write
        self.validator = validator
        self.host = host
        self.port = port
        self.max_frame_size = max_frame_size
        self.idle_timeout_ms = idle_timeout_ms
        self.transaction_timeout_s = transaction_timeout_s
        self.faults = faults if faults is not None else Faults(broker.config.name)
        self.connections: set[_AmqpProtocol] = set()
        self.read_buffer = memoryview(bytearray(READ_BUFFER_SIZE))
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]
        self._server: asyncio.base_events.Server | None = None
        self._ticker: asyncio.Task | None = None
        self._wake = asyncio.Event()
        self._ticking = True  # stop() clears it: the ticker ends even if its cancellation was swallowed
        # The servers of every namespace that shares this server's clock (runtime/namespaces.py): one
        # advance moves them all, each timer at its own time, in order across namespaces.
        self.clock_group: list[AmqpServer] = [self]
        # The cyclic collector's full collections at idle moments (runtime/collector.py; the CLI sets
        # it), which the timer task tells how long ago AMQP input arrived: ``reads`` counts reads.
        self.collector: Collector | None = None
        self.reads = 0
        # Long work in slices (sbemulator/scheduling/): the broker's due timers, a deleted entity's messages
        # freed, the store's folds, purges for the admin plane; one slice per callback, in turns.
        self.slices = slices
        self.jobs = JobDriver(self.commit, slices=slices, commit_wanted=store.commit_wanted)
        self._cleanup = EntityCleanup(broker)
        self._folds = StoreFolds(store)
        self._reads_seen, self._last_input = -1, time.monotonic()
        # Group commit (``full`` durability, where a commit is an fsync): connections flushed in one loop turn
        # share one commit (join_group), made in a callback after the turn's input callbacks.
        self.group_commit = getattr(store, "durability", PROCESS) == FULL
        self._group: dict[_AmqpProtocol, None] = {}

    def protocol(self) -> asyncio.BufferedProtocol:
        """A new connection's protocol: for TCP here, and for other transports that carry AMQP
        (runtime/websocket.py hands it a transport of its own)."""
        return _AmqpProtocol(self)

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        if self.one_port:
            self._listener = SniffingListener(Routes(amqp=self.protocol, unknown=Protocol.AMQP), self.host,
                                              self.port, backlog=512)
            await self._listener.start()
            self.port = self._listener.port
        else:
            self._server = await self.loop.create_server(
                self.protocol, self.host, self.port, reuse_address=True, backlog=512
            )
            self.port = self._server.sockets[0].getsockname()[1]
        self.jobs.bind(self.loop)
        self._ticker = self.loop.create_task(self._tick_forever())
        self.fold_later()  # what the last process left to clean up (a deleted entity's rows)

    def serve_http(self, http: ProtocolFactory | None, tls: ssl.SSLContext | None) -> None:
        """With ``one_port``: HTTP requests on the AMQP port go to ``http`` (the management endpoint's
        connection protocol, which also takes WebSocket upgrades), TLS is opened with ``tls`` and what is
        inside it goes to AMQP or ``http`` by its first bytes (amqps, HTTPS, wss). Without: nothing."""
        if self._listener is not None:
            self._listener.routes = Routes(amqp=self.protocol, http=http, tls=tls, unknown=Protocol.AMQP)

    @property
    def listener(self) -> SniffingListener | None:
        return self._listener

    def join_group(self, protocol: _AmqpProtocol) -> None:
        if not self._group:
            self.loop.call_soon(self._flush_group)
        self._group[protocol] = None

    def _flush_group(self) -> None:
        group, self._group = list(self._group), {}
        for protocol in group:
            gateway = protocol.gateway
            if gateway is not None and gateway.pump_pending:
                gateway.run_pending()
        failure = self.commit_flush()
        for protocol in group:
            protocol.write_out(failure)

    def commit_flush(self) -> BrokerError | StoreError | None:
        """A flush's commit: None when written; the error its sends are refused with; or the StoreError
        itself when the commit's journal records could not be synced (nothing of it may be confirmed)."""
        if self.store_writes:
            try:
                self.store.commit()
            except StoreError as exc:
                failure = self.store_failed(exc)
                if exc.unsynced:
                    log.error("the store could not sync its delivery journal (%s): the connections of this "
                              "commit are dropped unanswered, so nothing unsynced is confirmed", exc.reason)
                    return exc
                return failure
            if self.store_failing is not None:
                self.store_recovered()
        self.fold_later()
        return None

    def settle_room(self, path: str) -> BrokerError | None:
        """Whether a settlement of ``path`` can be kept (the store's ensure_room): None, or the error that
        says why not (gateway/settling.py refuses the settlement with ServerBusy)."""
        try:
            self.store.ensure_room(path)
        except StoreError as exc:
            return self.store_failed(exc)
        return None

    def commit(self) -> BrokerError | None:
        """Commit what the broker buffered; a store that cannot write is logged (the work stays buffered
        and the next commit tries again), never raised into the event loop. Returns what a write of this
        commit is refused with (None when written): the management plane refuses a console send with it."""
        return self.commit_window()

    def commit_window(self) -> BrokerError | None:
        """Commit; None when written, else the error the sends of this commit are refused with."""
        try:
            self.store.commit()
        except StoreError as exc:
            return self.store_failed(exc)
        if self.store_failing is not None:
            self.store_recovered()
        self.fold_later()
        return None

    def fold_later(self) -> None:
        """After a commit: the deferred work (a deleted entity's messages freed, a durable store's delivery
        journal folded into SQLite) as jobs of the scheduler, in callbacks of their own, before a commit
        finds the journal full and folds it on its way, in the same callback as the work it commits."""
        if self.loop is None:
            return
        cleanup, folds = self._cleanup, self._folds
        if not cleanup.scheduled and self.broker.drops:
            cleanup.scheduled = True
            self.jobs.start(cleanup, commit=False)
        if not folds.scheduled and self.store_writes and self.store.fold_due():
            folds.scheduled = True
            self.jobs.start(folds, commit=False)

    def store_failed(self, exc: StoreError) -> BrokerError:
        """A commit failed. A full disk stays full until space is freed: its sends are refused with
        QuotaExceeded, what Service Bus answers when an entity or namespace can take no more, and which
        the SDKs do not retry. Another write error may pass: ServerBusy, which the SDKs retry after a
        pause. Said once per episode in the log, with what to do."""
        if self.store_failing is None or self.store_failing.reason != exc.reason:
            if exc.full:
                log.warning("the store is full (%s): sends are refused with QuotaExceeded until the data "
                            "directory has room (receiving and completing messages frees some)", exc.reason)
            else:
                log.warning("the store cannot write (%s): sends are refused with ServerBusy until it "
                            "writes again", exc.reason)
        self.store_failing = exc
        if exc.full:
            return QuotaExceededError(
                f"Not stored: the emulator's store is full ({exc.reason}), so nothing of this request was "
                "applied. Receiving and completing messages frees space, and writes are taken again as soon "
                "as it can write."
            )
        return ServerBusyError(
            f"Not stored: the emulator's store could not write ({exc.reason}), so nothing of this request "
            "was applied. Try again later."
        )

    def store_recovered(self) -> None:
        log.warning("the store writes again: sends are taken")
        self.store_failing = None

    def _collect(self) -> bool:
        """The cyclic collector's turn (runtime/collector.py), told when AMQP input last arrived in any
        namespace of this clock; whether it collected."""
        collector = self.collector
        if collector is None:
            return False
        reads = sum(server.reads for server in self.clock_group)  # every namespace's input
        if reads != self._reads_seen:
            self._reads_seen, self._last_input = reads, time.monotonic()
        return collector.tick(self._last_input)

    async def _tick_forever(self) -> None:
        """Wait for the broker's next deadline, then run its due timers as a job of the scheduler (slices
        of ``Slices.slice_s`` or less, each committed, connections served between them)."""
        self.broker.on_deadline_changed = self._wake.set
        clock = self.clock
        # A manual clock does not move while the ticker waits: a timer not yet due waits for an
        # advance (which wakes the ticker), not for its distance in real seconds.
        manual = isinstance(clock, ManualClock)
        timers = TimerRun(self.broker, self._collect)
        wait_s = self.slices.timer_wait_s
        while self._ticking:
            if self._collect():
                await asyncio.sleep(0)  # a collection is a callback of its own, never with the timers
            deadline = self.broker.next_deadline()
            now = clock()
            delay = (wait_s if deadline is None or (manual and deadline > now)
                     else min(wait_s, max(0.0, deadline - now)))
            if delay > 0:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), delay)
                    continue  # an earlier timer appeared (or stop() woke it): recompute the delay
                except TimeoutError:
                    pass
            try:
                await self.jobs.run(timers)
            except asyncio.CancelledError:
                raise
            except Exception:
                pass  # logged by the driver; the next deadline is looked at again
            # Yield even when the next timer is already due: connections are read and written between runs.
            await asyncio.sleep(0)

    def advance_clock(self, seconds: float) -> float:
        """Move a manual clock forward and run every broker timer that became due, then commit, so
        that what the time change did (locks lapsed, messages expired or activated) is done and
        durable when this returns; receivers it gave work to are told as after any timer. On the
        event loop only. Returns the new time (epoch seconds)."""
        clock = self.clock
        if not isinstance(clock, ManualClock):
            raise ValueError("The emulator runs on real time: start it with --clock manual "
                             "(Emulator(clock='manual')) to move its time.")
        if not seconds >= 0:
            raise ValueError(f"The clock moves forward only: cannot advance by {seconds!r} seconds.")
        target = clock() + seconds
        servers = list(self.clock_group)
        # Step through every deadline on the way, so each timer fires at its own time: a scheduled
        # message is enqueued at its scheduled time and a lock lapses at its end, as if the time had
        # passed (half a millisecond past a deadline, so the broker's whole-ms reading reaches it).
        # Namespaces sharing the clock step together: the earliest deadline of any of them next.
        while True:
            deadlines = [d for d in (server.broker.next_deadline() for server in servers) if d is not None]
            deadline = min(deadlines, default=None)
            if deadline is None or deadline > target:
                break
            clock.set(min(target, max(clock(), deadline + 0.0005)))
            for server in servers:
                server.broker.tick()
            if clock() >= target:
                break
        now = clock.set(target)
        for server in servers:
            server.broker.tick()
            server.commit()
            server._wake.set()  # the ticker recomputes its next deadline
        return now

    async def stop(self) -> None:
        if self._ticker is not None:
            # Python 3.11's wait_for loses a cancellation that arrives as the event it waits on is set
            # (the wake-up wins): the flag and the wake-up end the loop whichever of them it sees.
            self._ticking = False
            self._wake.set()
            self._ticker.cancel()
            try:
                await asyncio.wait_for(asyncio.shield(self._ticker), 2.0)
            except (asyncio.CancelledError, Exception):
                pass
        self.jobs.close()
        if self._server is not None:
            self._server.close()
        if self._listener is not None:
            await self._listener.stop()
        for protocol in list(self.connections):
            gateway = protocol.gateway
            if gateway is not None and not gateway.connection_closed:
                gateway.shut_down("The emulator is shutting down.")
                protocol.write_out(self.commit_flush())  # the close frame, after a last commit
            if protocol.transport is not None:
                protocol.transport.close()
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            except (TimeoutError, Exception):
                pass
        self.commit()
