"""What each broker sends the same client per message: AMQP frames by performative, bytes and TCP writes.

A loopback relay between the python-qpid-proton client of ``bench.peers`` and each broker counts, in
each direction, the bytes, the reads the relay made (each about one write by the peer, on an idle
loopback) and every AMQP frame by its performative (after the protocol headers and SASL). It runs the
phases of ``bench.peers`` through it (a send, a receive with ``accepted``, a send, a pre-settled
receive) and prints per message of each phase, so what one broker sends that another batches shows. For
the receive phases it also keeps one delivery's message sections and times proton's ``Message.decode``
of them: what the client's Python spends on what the broker put in each message. The client CPU here
includes the relay's (a thread of this process); ``bench.peers`` has the clean figure.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import socket
import sys
import tempfile
import threading
import timeit
from collections import Counter
from pathlib import Path

from ._util import markdown_table
from .peer_brokers import CACHE, brokers
from .peers import run_phase

NAMES = {0x10: "open", 0x11: "begin", 0x12: "attach", 0x13: "flow", 0x14: "transfer", 0x15: "disposition",
         0x16: "detach", 0x17: "end", 0x18: "close"}
READ_SIZE = 1 << 20


class Tally:
    """Bytes, reads and frames seen in one direction; frames are parsed as they stream past."""

    def __init__(self) -> None:
        self.bytes = 0
        self.reads = 0
        self.frames: Counter[str] = Counter()
        self.buffer = bytearray()
        self.capture = False  # keep the next transfer's message payload (one delivery's sections)
        self.sample: bytes | None = None

    def feed(self, data: bytes) -> None:
        self.bytes += len(data)
        self.reads += 1
        self.buffer += data
        while True:
            if self.buffer[:4] == b"AMQP" and len(self.buffer) >= 8:
                del self.buffer[:8]
                continue
            if len(self.buffer) < 8:
                return
            size = int.from_bytes(self.buffer[:4], "big")
            if len(self.buffer) < size:
                return
            frame = bytes(self.buffer[:size])
            del self.buffer[:size]
            body = frame[frame[4] * 4:]
            if frame[5] == 1:
                self.frames["sasl"] += 1
            elif not body:
                self.frames["empty"] += 1
            elif body[:2] == b"\x00\x53":
                self.frames[NAMES.get(body[2], hex(body[2]))] += 1
                if body[2] == 0x14 and self.capture:
                    self.capture = False
                    self.sample = body[5 + body[4]:] if body[3] == 0xC0 else body[8 + int.from_bytes(body[4:8], "big"):]
            else:
                self.frames["other"] += 1

    def snapshot(self) -> tuple[int, int, Counter[str]]:
        return self.bytes, self.reads, Counter(self.frames)


class Relay:
    """One TCP relay on a free loopback port to ``target``, its event loop in a thread of its own."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.down = Tally()  # broker -> client
        self.up = Tally()  # client -> broker
        self.loop = asyncio.new_event_loop()
        listener = socket.create_server(("127.0.0.1", 0))
        self.port = listener.getsockname()[1]
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(self.loop)
            self.server = self.loop.run_until_complete(asyncio.start_server(self.handle, sock=listener))
            ready.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()
        ready.wait(10)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        broker_reader, broker_writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", self.target), 10)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, tally: Tally) -> None:
            try:
                while data := await src.read(READ_SIZE):
                    tally.feed(data)
                    dst.write(data)
                    await dst.drain()
            except OSError:
                pass
            finally:
                dst.close()

        await asyncio.gather(pump(reader, broker_writer, self.up), pump(broker_reader, writer, self.down))

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def decode_us(payload: bytes) -> float:
    """Microseconds python-qpid-proton's ``Message.decode`` takes for one delivery's sections (best of 5)."""
    from proton import Message

    message = Message()
    runs = 2_000
    return min(timeit.repeat(lambda: message.decode(payload), number=runs, repeat=5)) / runs * 1e6


def per(before: tuple[int, int, Counter[str]], after: tuple[int, int, Counter[str]], n: int) -> str:
    """The frames of each performative between two snapshots, per message (opens and the like omitted)."""
    frames = after[2] - before[2]
    return ", ".join(f"{k} {v / n:.3f}" for k, v in sorted(frames.items()) if v / n >= 0.001)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--credit", type=int, default=100)
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--sbemulator-full", default=None)
    args = parser.parse_args(argv)
    selected = [b for b in brokers(None) if b.mode == "durable" or b.kind == "sbemulator"]
    selected = [b for b in selected if not args.only or any(o.lower() in b.name.lower() for o in args.only)]
    rows = []
    CACHE.mkdir(parents=True, exist_ok=True)
    for broker in selected:
        broker.prepare()
        with tempfile.TemporaryDirectory(prefix="frames-", dir=CACHE) as tmp:
            running = broker.start(Path(tmp))
            relay = Relay(running.port)
            try:
                for kind in ("send", "accept", "send", "presettled"):
                    relay.down.capture = kind != "send"
                    down0, up0 = relay.down.snapshot(), relay.up.snapshot()
                    result = run_phase(broker, dataclasses.replace(running, port=relay.port), kind,
                                       args.messages, args.size, args.credit)
                    down1, up1 = relay.down.snapshot(), relay.up.snapshot()
                    n = args.messages
                    decode = decode_us(relay.down.sample) if kind != "send" and relay.down.sample else None
                    rows.append([broker.name, kind, (down1[0] - down0[0]) / n, (down1[1] - down0[1]) / n,
                                 per(down0, down1, n), (up1[0] - up0[0]) / n, (up1[1] - up0[1]) / n,
                                 per(up0, up1, n), result.client_cpu * 10_000 / n,
                                 "" if decode is None else f"{len(relay.down.sample or b'')} B, {decode:.1f} us"])
            finally:
                relay.close()
                running.stop()
    print(markdown_table(["broker", "phase", "bytes in/msg", "reads in/msg", "frames in/msg", "bytes out/msg",
                          "reads out/msg", "frames out/msg", "client CPU s/10k",
                          "one delivery's sections: size, proton decode"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
