"""Short link ids: random, unguessable ids a link carries in place of a signed payload (pure).

A short link (`/r/{id}`, `/m/{id}`) names a row by a random id that is looked up with one GetItem; nothing in
the URL can be read or forged. 16 bytes from `secrets` give 128 bits of entropy, written as 22 base64url
characters: a stranger guessing ids at any rate the API allows never finds one, and an unknown id costs one
read and earns the same bad-link page as a forged one. Signed links (chalicelib/tokens.py) always hold a dot,
so the two forms never look alike and both are accepted on every link route.
"""

from __future__ import annotations

import re
import secrets

LINK_ID_BYTES = 16  # 128 bits
LINK_ID_CHARS = 22  # base64url of 16 bytes, unpadded
_LINK_ID = re.compile(r"[A-Za-z0-9_-]{22}")


def new_link_id() -> str:
    """A fresh random link id: 128 bits from the OS's CSPRNG, URL-safe."""
    return secrets.token_urlsafe(LINK_ID_BYTES)


def is_link_id(text: str) -> bool:
    """True when `text` has a short link id's shape (22 base64url characters); a signed token never does."""
    return bool(_LINK_ID.fullmatch(text))
