"""The broker's clock: real time (``time.time``, the default) or a manual clock that moves only when
told to.

Why a manual clock: a test of a scheduled message, a TTL, a lapsing lock or a duplicate-detection
window otherwise waits for it in real time. With ``ManualClock`` the broker's timers (lock, TTL,
scheduled activation, session lock) and every time it stamps (enqueued, locked-until, expiry,
duplicate-detection window, session state updates) follow the manual time, and
``advance(seconds)`` jumps it forward; the server then runs every timer that became due before it
answers (see ``AmqpServer.advance_clock``).

The clock is a plain callable returning epoch seconds, so the broker reads it the same way whichever
it is and the real-time path costs nothing more. A manual clock starts at the real time of its
creation and never goes back. It is read and moved on the emulator's event loop only.

A leaf module: imports nothing of the emulator.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable

REAL = "real"
MANUAL = "manual"
CLOCK_MODES = (REAL, MANUAL)

Clock = Callable[[], float]


class ManualClock:
    """Epoch seconds that change only through :meth:`advance` (or :meth:`set`, forward only)."""

    __slots__ = ("_now",)

    def __init__(self, start: float | None = None) -> None:
        self._now = time.time() if start is None else float(start)

    def __call__(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        """Move forward by ``seconds`` (>= 0); returns the new time."""
        seconds = float(seconds)
        if not seconds >= 0:  # also refuses NaN
            raise ValueError(f"The clock moves forward only: cannot advance by {seconds!r} seconds.")
        self._now += seconds
        return self._now

    def set(self, when: float) -> float:
        """Move to epoch seconds ``when``, which may not be earlier than now."""
        return self.advance(float(when) - self._now)

    def __repr__(self) -> str:
        return f"ManualClock({to_datetime(self._now).isoformat()})"


def make_clock(mode: str | Clock | None) -> Clock:
    """``"real"``/None -> ``time.time``; ``"manual"`` -> a new :class:`ManualClock`; a callable as is."""
    if mode is None or mode == REAL:
        return time.time
    if mode == MANUAL:
        return ManualClock()
    if callable(mode):
        return mode
    raise ValueError(f"Unknown clock {mode!r}: use one of {', '.join(CLOCK_MODES)}.")


def clock_mode(clock: Clock) -> str:
    return MANUAL if isinstance(clock, ManualClock) else REAL


def to_datetime(seconds: float) -> dt.datetime:
    """Epoch seconds as an aware UTC datetime (what the SDKs show for enqueued and lock times)."""
    return dt.datetime.fromtimestamp(seconds, dt.UTC)


__all__ = ["CLOCK_MODES", "MANUAL", "REAL", "Clock", "ManualClock", "clock_mode", "make_clock", "to_datetime"]
