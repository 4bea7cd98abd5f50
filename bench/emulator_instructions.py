"""Machine instructions the emulator executes per peek-locked message, counted by valgrind's callgrind.

Why: ``bench.emulator_python_cost`` times the replayed peek phase with ``time.process_time``, and on a
shared 2-core machine its minimum still moves by 20-40% between runs, more than the 5% a change to the
per-message path may cost. An instruction count does not depend on what else runs: the same code and
the same input give the same figure to a few hundredths of a percent, so two checkouts can be compared
at any time, loaded or not. What it does not see: a change that costs wall time without instructions
(cache misses, a system call that blocks); that is what the timed benchmarks are for.

How: the SDK's bytes are recorded once through a real emulator (``emulator_python_cost.record``), then
each mode's replay runs in a child process under ``valgrind --tool=callgrind``, collecting only inside
``functools.reduce``, which drives the peek phase and nothing else. Needs valgrind on PATH and a Python
whose symbols valgrind can read (a self-built or distribution Python; ``nm`` finds ``functools_reduce``
in libpython). Under valgrind the replay runs about 50 times slower: keep ``--messages`` small.

``python -m bench.emulator_instructions --messages 2000`` prints, per mode, instructions per message.
Run it in two checkouts with the same ``--recording FILE`` to compare them on the same input (the
file is made by the first run and holds the message count; it is a pickle: only load your own). A
recording is good for about an hour: the SAS tokens the SDK put in it expire, and a replay the server
refuses is reported as such rather than counted.
"""

from __future__ import annotations

import argparse
import functools
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ._util import config_file, topology
from .emulator_python_cost import Recording, prepared_server, record
from .emulator_throughput import QUEUE

VALGRIND_TIMEOUT_S = 900.0  # one mode's replay under callgrind; 2,000 messages take about a minute
_COLLECTED = re.compile(r"Collected : (\d+)")
WRITES_MARK = "[emulator_instructions] writes: "
_WRITES = re.compile(re.escape(WRITES_MARK) + r"(\d+)")


def replay_peek(config: Path, recording: Recording, *, in_memory: bool) -> int:
    """Replay ``recording`` into a fresh server; the peek phase runs inside ``functools.reduce``."""
    with prepared_server(config, recording, in_memory=in_memory) as (peek, transport):
        functools.reduce(lambda _, item: item[0].data_received(item[1]), peek, None)
    return transport.writes


def count(recording_file: Path, mode: str, messages: int) -> int:
    """Instructions callgrind collected in one mode's peek phase (a child process)."""
    with tempfile.TemporaryDirectory(prefix="sbbench-callgrind-") as out_dir:
        result = subprocess.run(
            ["valgrind", "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=functools_reduce",
             f"--callgrind-out-file={out_dir}/callgrind.out", sys.executable, "-m", "bench.emulator_instructions",
             "--replay", str(recording_file), "--mode", mode],
            capture_output=True, text=True, timeout=VALGRIND_TIMEOUT_S, check=False,
        )
    found = _COLLECTED.search(result.stderr)
    writes = _WRITES.search(result.stderr)
    if result.returncode != 0 or found is None or writes is None:
        raise SystemExit(f"callgrind failed ({result.returncode}): {result.stderr[-2000:]}")
    if int(writes.group(1)) < messages:
        # The SDK's put-token carries a SAS token that expires (an hour by default): replayed later, the
        # server refuses it and the peek phase does next to nothing, which would read as a speed-up.
        raise SystemExit(f"the replay wrote {writes.group(1)} times for {messages:,} messages: the recording's "
                         "tokens have probably expired (a recording is good for about an hour); record again")
    return int(found.group(1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--size", type=int, default=200, help="body bytes per message")
    parser.add_argument("--modes", default="in-memory,durable")
    parser.add_argument("--recording", type=Path, help="reuse (or create) this recording of the SDK's bytes")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds the recording may take")
    parser.add_argument("--replay", type=Path, help=argparse.SUPPRESS)  # the child under valgrind
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    with config_file(topology([QUEUE])) as config:
        if args.replay is not None:
            recording = Recording(chunks=pickle.loads(args.replay.read_bytes())[1])
            writes = replay_peek(config, recording, in_memory=args.mode == "in-memory")
            print(f"{WRITES_MARK}{writes}", file=sys.stderr)
            return 0
        if shutil.which("valgrind") is None:
            raise SystemExit("valgrind is not on PATH (apt-get install valgrind)")
        with tempfile.TemporaryDirectory(prefix="sbbench-rec-") as rec_dir:
            recording_file = args.recording or Path(rec_dir) / "recording.pickle"
            if not recording_file.exists():
                print(f"[emulator_instructions] recording {args.messages:,} messages through the SDK ...", flush=True)
                recording = record(config, args.messages, args.size, args.timeout)
                recording_file.write_bytes(pickle.dumps((args.messages, recording.chunks)))
            messages, _chunks = pickle.loads(recording_file.read_bytes())
            for mode in (m.strip() for m in args.modes.split(",")):
                instructions = count(recording_file, mode, messages)
                print(f"{mode}: {instructions / messages:,.0f} instructions per peek-locked message "
                      f"({instructions:,} in the peek phase of {messages:,} messages)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
