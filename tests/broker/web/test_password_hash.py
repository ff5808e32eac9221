"""broker/web/password_hash.py: scrypt hashes that check the right password only, carry their parameters, and
refuse malformed text without echoing it."""

from __future__ import annotations

import pytest

from broker.web.password_hash import KEY_BYTES, SALT_BYTES, PasswordHash


def test_a_hash_checks_its_password_and_no_other() -> None:
    hashed = PasswordHash.make("correct horse", n=2**10)
    assert hashed.verify("correct horse")
    assert not hashed.verify("correct horse ")
    assert not hashed.verify("")
    assert (len(hashed.salt), len(hashed.key)) == (SALT_BYTES, KEY_BYTES)


def test_the_text_form_round_trips_and_holds_no_password() -> None:
    hashed = PasswordHash.make("hunter2", n=2**10)
    text = hashed.encode()
    assert text.startswith("scrypt$1024$8$1$")
    assert ":" not in text
    assert "hunter2" not in text
    again = PasswordHash.parse(text)
    assert again == hashed
    assert again.verify("hunter2")
    assert "hunter2" not in repr(again)
    assert again.encode() not in repr(again)


def test_two_hashes_of_one_password_differ_by_their_salt() -> None:
    first, second = PasswordHash.make("same", n=2**10), PasswordHash.make("same", n=2**10)
    assert first.salt != second.salt
    assert first.key != second.key


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("plain-password", "expected scrypt$n$r$p$salt$key, got 1"),
        ("bcrypt$1$2$3$4$5", "expected scrypt$n$r$p$salt$key"),
        (
            "scrypt$1000$8$1$AAAAAAAAAAAAAAAAAAAAAA==$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
            "power of 2",
        ),
        ("scrypt$1024$8$1$!!!$AAAA", "malformed scrypt hash"),
        ("scrypt$1024$8$1$AAAA$AAAA", "too short"),
    ],
)
def test_malformed_text_is_refused_without_echoing_it(text: str, says: str) -> None:
    with pytest.raises(ValueError) as caught:
        PasswordHash.parse(text)
    assert says in str(caught.value)
    assert text not in str(caught.value)
