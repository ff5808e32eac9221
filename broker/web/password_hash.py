"""A salted password hash for the HTTP users file: scrypt (RFC 7914) from :mod:`hashlib`.

Text form, one token without ``:`` so that it fits a ``name:role:hash`` line::

    scrypt$<n>$<r>$<p>$<salt, base64>$<derived key, base64>

e.g. ``scrypt$32768$8$1$3q2+7w...$Zm9v...``: 16 random bytes of salt, a 32-byte key. The cost parameters
travel with each hash, so that raising :data:`DEFAULT_N` later leaves old hashes valid. A check compares in
constant time (:func:`hmac.compare_digest`). The password itself is never stored, logged or returned.

Immutable; safe from any thread.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from dataclasses import dataclass

SCHEME = "scrypt"
DEFAULT_N = 2**15
DEFAULT_R = 8
DEFAULT_P = 1
SALT_BYTES = 16
KEY_BYTES = 32
#: scrypt needs 128 * n * r bytes; OpenSSL's default limit (32 MiB) is just too small for n = 2**15
_MAX_N = 2**20


def _maxmem(n: int, r: int, p: int) -> int:
    return 128 * n * r * (p + 2) + 1024 * 1024


@dataclass(frozen=True)
class PasswordHash:
    """One scrypt hash with its parameters and salt (see the module docstring)."""

    n: int
    r: int
    p: int
    salt: bytes
    key: bytes

    @classmethod
    def make(cls, password: str, n: int = DEFAULT_N, r: int = DEFAULT_R, p: int = DEFAULT_P) -> PasswordHash:
        """A new hash of ``password`` with a fresh random salt."""
        salt = os.urandom(SALT_BYTES)
        return cls(n, r, p, salt, _derive(password, salt, n, r, p))

    @classmethod
    def parse(cls, text: str) -> PasswordHash:
        """The hash of its text form; :class:`ValueError` saying what is wrong (never echoing the text)."""
        parts = text.split("$")
        if len(parts) != 6 or parts[0] != SCHEME:
            raise ValueError(f"expected {SCHEME}$n$r$p$salt$key, got {len(parts)} '$'-separated fields")
        try:
            n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
            salt = base64.b64decode(parts[4], validate=True)
            key = base64.b64decode(parts[5], validate=True)
        except (ValueError, binascii.Error) as exc:
            raise ValueError(f"malformed {SCHEME} hash: {exc}") from None
        if n < 2 or n > _MAX_N or n & (n - 1) or not 1 <= r <= 64 or not 1 <= p <= 16:
            raise ValueError(f"{SCHEME} parameters n={n} r={r} p={p} out of range (n a power of 2 <= 2**20)")
        if len(salt) < 8 or len(key) < 16:
            raise ValueError(f"{SCHEME} salt or key too short ({len(salt)} and {len(key)} bytes)")
        return cls(n, r, p, salt, key)

    def encode(self) -> str:
        salt = base64.b64encode(self.salt).decode()
        key = base64.b64encode(self.key).decode()
        return f"{SCHEME}${self.n}${self.r}${self.p}${salt}${key}"

    def verify(self, password: str) -> bool:
        """Whether ``password`` is the one hashed (constant-time comparison)."""
        derived = _derive(password, self.salt, self.n, self.r, self.p, len(self.key))
        return hmac.compare_digest(derived, self.key)

    def __repr__(self) -> str:  # the key is not a secret by itself, but it is brute-forceable: keep it out
        return f"PasswordHash({SCHEME}, n={self.n}, r={self.r}, p={self.p})"


def _derive(password: str, salt: bytes, n: int, r: int, p: int, length: int = KEY_BYTES) -> bytes:
    return hashlib.scrypt(
        password.encode("utf-8"), salt=salt, n=n, r=r, p=p, maxmem=_maxmem(n, r, p), dklen=length
    )
