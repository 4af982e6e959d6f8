"""What every digest of device and host code shares: its size, and how fields are fed to it."""

from __future__ import annotations

import hashlib

DIGEST_BYTES = 8  # 16 hex characters: two builds' digests are compared for equality, never searched


def feed(h: hashlib.blake2b, *fields: bytes | str | int) -> None:
    """Each field, length-prefixed: no two field lists feed the same bytes."""
    for f in fields:
        data = f if isinstance(f, bytes) else str(f).encode()
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)


def new(*fields: bytes | str | int, size: int = DIGEST_BYTES) -> hashlib.blake2b:
    h = hashlib.blake2b(digest_size=size)
    feed(h, *fields)
    return h
