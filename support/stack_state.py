"""Where the running local stack (`make dev`) listens, as it writes it down for `bisn` to read.

The stack's ports can be moved (DEVSTACK_*_PORT, devstack/runner.py), so `bisn --stage local` would otherwise guess
the emulator's port. The runner writes `.devstack/stack.json` once every piece answers and removes it when it stops;
a file left by a stack that died without stopping names a process that is gone, and is not believed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

STATE_FILE = Path(__file__).resolve().parent.parent / ".devstack" / "stack.json"


@dataclass(frozen=True, kw_only=True)
class StackState:
    """The running stack's process and the base URL of each piece."""

    pid: int
    moto: str
    api: str
    console: str
    cors_origins: tuple[str, ...] = ()


def write(state: StackState, path: Path = STATE_FILE) -> None:
    """Record the running stack, replacing any earlier record in one rename (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps({**asdict(state), "cors_origins": list(state.cors_origins)}, indent=2) + "\n")
    partial.replace(path)


def remove(pid: int, path: Path = STATE_FILE) -> None:
    """Forget the record, only if it is this process's: a second stack started since keeps its own."""
    found = read(path, alive=lambda _: True)
    if found is not None and found.pid == pid:
        path.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: it exists
    return True


def read(path: Path = STATE_FILE, *, alive: Callable[[int], bool] = _alive) -> StackState | None:
    """The running stack's record; None when there is none, it cannot be read, or its process is gone."""
    try:
        data = json.loads(path.read_text())
        state = StackState(
            pid=int(data["pid"]),
            moto=str(data["moto"]),
            api=str(data["api"]),
            console=str(data["console"]),
            cors_origins=tuple(str(o) for o in data.get("cors_origins") or ()),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return state if alive(state.pid) else None
