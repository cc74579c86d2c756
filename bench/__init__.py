"""Benchmarks of the back-in-stock notifier, in-process on the emulator (`make bench`, docs/BENCHMARKS.md)."""
