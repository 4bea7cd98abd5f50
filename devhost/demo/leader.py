"""The demo's leader election: two replicas compete for one session on ``leader-election``
(``shared.leader.LeaderElector``, the exclusive-consumer pattern as a session lock); the leader is
stopped during the run and the standby takes over. The gap is measured from the moment the leader
stood down (its ``on_lost``) to the moment the standby was elected.

Stopping releases the session at once, as a process that shuts down does. A leader that dies without
releasing it is replaced only when its lock expires (the queue's LockDuration, 30 s): that case is
measured by tests/integration/test_ordered_failover.py and docs/functions.md, not in a one-minute demo.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from shared.leader import LeaderElector
from shared.topology import QUEUE_LEADER_ELECTION

log = logging.getLogger("devhost.demo")
REPLICAS = ("replica-a", "replica-b")


class LeaderDemo:
    def __init__(self, client_factory: Callable[[], Any]) -> None:
        self._client = client_factory()
        self.session_id = f"demo-leader-{uuid.uuid4().hex[:6]}"
        self.events: list[tuple[float, str, str]] = []  # (time.time(), replica, "elected" | "lost")
        self._lock = threading.Lock()
        self.electors = {name: LeaderElector(self._client, QUEUE_LEADER_ELECTION, self.session_id,
                                             on_elected=functools.partial(self._event, name, "elected"),
                                             on_lost=functools.partial(self._event, name, "lost"),
                                             lock_duration=30.0, retry_interval=0.2, acquire_wait=1.0)
                         for name in REPLICAS}
        self._threads = {name: threading.Thread(target=e.run, name=f"demo-{name}", daemon=True)
                         for name, e in self.electors.items()}
        self.stopped: tuple[float, str] | None = None

    def _event(self, replica: str, what: str) -> None:
        with self._lock:
            self.events.append((time.time(), replica, what))

    def start(self) -> None:
        first, second = REPLICAS
        self._threads[first].start()  # the first replica starts alone, so it is the first leader
        deadline = time.monotonic() + 10
        while not self.electors[first].is_leader() and time.monotonic() < deadline:
            time.sleep(0.05)
        self._threads[second].start()

    def leader(self) -> str | None:
        return next((name for name, e in self.electors.items() if e.is_leader()), None)

    def stop_leader(self) -> str | None:
        """Stop whichever replica leads now (in the background: it releases its session)."""
        name = self.leader()
        if name is not None:
            self.stopped = (time.time(), name)
            self.electors[name].stop()
        return name

    def failover_gap(self) -> float | None:
        """Seconds from the stopped leader's stand-down to the other replica's election."""
        if self.stopped is None:
            return None
        with self._lock:
            events = list(self.events)
        lost = next((at for at, name, what in events if name == self.stopped[1] and what == "lost"), None)
        elected = next((at for at, name, what in events
                        if name != self.stopped[1] and what == "elected" and lost is not None and at >= lost), None)
        return None if lost is None or elected is None else elected - lost

    def describe(self, start: float) -> str:
        leader = self.leader() or "none"
        text = f"leader: {leader}"
        if self.stopped is not None:
            gap = self.failover_gap()
            text += (f"; {self.stopped[1]} stopped at {self.stopped[0] - start:.0f} s, "
                     + (f"the standby took over {gap:.2f} s after it stood down" if gap is not None
                        else "the standby has not taken over yet"))
        return text

    def close(self) -> None:
        for elector in self.electors.values():
            elector.stop()
        for thread in self._threads.values():
            if thread.is_alive():
                thread.join(10)
        try:
            self._client.close()
        except Exception as exc:
            log.debug("closing the leader demo's client failed: %s", exc)
