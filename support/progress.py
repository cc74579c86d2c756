"""Progress of a long `bisn` operation on stderr, so stdout stays the answer (and `--json` stays parseable).

On a terminal one line is rewritten in place, once `live_from` items are done (a short answer shows none);
elsewhere (a log, a pipe, CI) a line is written every `every` items, so a long run shows it is alive without
flooding the log.
"""

from __future__ import annotations

from typing import TextIO


class Progress:
    """Counts items of one operation and reports the count on a stream."""

    def __init__(
        self, label: str, stream: TextIO, *, every: int = 1000, total: int | None = None, live_from: int = 1
    ) -> None:
        self.label = label
        self.live_from = live_from
        self.stream = stream
        self.every = max(1, every)
        self.total = total
        self.count = 0
        self._live = stream.isatty()
        self._shown = False

    def _line(self) -> str:
        of = f" of ~{self.total}" if self.total is not None else ""
        return f"{self.label}: {self.count}{of}"

    def __call__(self, done: int) -> None:
        """`done` more items have been handled."""
        before = self.count
        self.count += done
        if self._live:
            if self.count >= self.live_from:
                self.stream.write("\r" + self._line())
                self._shown = True
        elif self.count // self.every > before // self.every:
            self.stream.write(self._line() + "\n")
        self.stream.flush()

    def finish(self) -> None:
        """End the live line (a terminal) so the answer starts on a line of its own."""
        if self._live and self._shown:
            self.stream.write("\n")
            self.stream.flush()
