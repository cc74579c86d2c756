"""Patches to the embedded AWS emulator (moto), in two kinds, installed through one function.

- Fidelity (`fidelity.py`): DynamoDB serialises writes to an item and runs a transaction atomically; moto does
  neither under threads. One lock around each DynamoDB request gives the emulator that guarantee, and a
  transaction's rollback copy takes only the items it names (same rollback, far less work). Every run needs them:
  the concurrency tests mean what they would on AWS only with them in place.
- Speed (`speed.py`): take out work moto does and DynamoDB does not. The bookkeeping group (how moto moves data)
  goes in everywhere; the parse group changes how conditions are evaluated, so the correctness suite
  (`make test`) runs without it, and `make dev` and `make bench` use it.

Both are written against one moto version, PINNED_MOTO (requirements-dev.txt pins it). On any other version the
speed patches stay out (slower, never wrong); the fidelity patches wrap moto's public backend methods and go in.
"""

from __future__ import annotations

PINNED_MOTO = "5.2.5"


def pinned() -> bool:
    """True when the installed moto is the version these patches were written against."""
    import moto

    return bool(moto.__version__ == PINNED_MOTO)


def install(*, fidelity: bool = True, speed: bool = False, bookkeeping: bool = True) -> list[str]:
    """Install the chosen patches (idempotent); returns the names of the speed patches in place.

    `bookkeeping` puts in the speed patches that change only how moto moves data; `speed` puts in every one.
    """
    from devstack.moto_patches import speed as speed_patches

    if fidelity:
        from devstack.moto_patches import fidelity as fidelity_patches

        fidelity_patches.install()
    if pinned():
        if bookkeeping or speed:
            speed_patches.install_bookkeeping()
        if speed:
            speed_patches.install()
    return speed_patches.installed()


def uninstall_speed() -> None:
    """Take the parse patches out again (the fast-path tests put them in only for themselves)."""
    from devstack.moto_patches import speed as speed_patches

    speed_patches.uninstall()
