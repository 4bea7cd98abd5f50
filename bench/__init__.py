"""Benchmarks with results in docs/benchmarks.md (each module says its command): the emulator's throughput
and Python cost per message, the load-leveling and priority patterns, topic fan-out, start-up. They may
import anything in the repository; only tests import them (to check their arithmetic)."""
