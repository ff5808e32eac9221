"""SCRAM credentials and the mechanisms' math (broker/network/scram_credential.py), against RFC 7677's
example exchange and Kafka's text form."""

from __future__ import annotations

import base64

import pytest

from broker.network.scram_credential import ScramCredential, ScramMechanism

# RFC 7677 section 3: user "user", password "pencil"
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FIRST_BARE = "n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
CLIENT_FINAL_WITHOUT_PROOF = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
PROOF = "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
SERVER_SIGNATURE = "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_the_credential_verifies_rfc_7677s_exchange() -> None:
    mechanism = ScramMechanism.SCRAM_SHA_256
    salted = mechanism.salted_password("pencil", SALT, 4096)
    credential = ScramCredential.from_salted_password(mechanism, salted, SALT, 4096)
    auth_message = f"{CLIENT_FIRST_BARE},{SERVER_FIRST},{CLIENT_FINAL_WITHOUT_PROOF}".encode()
    signature = mechanism.hmac(credential.stored_key, auth_message)
    client_key = bytes(a ^ b for a, b in zip(base64.b64decode(PROOF), signature, strict=True))
    assert mechanism.hash(client_key) == credential.stored_key  # what the server checks
    assert base64.b64encode(mechanism.hmac(credential.server_key, auth_message)).decode() == SERVER_SIGNATURE
    assert credential.matches_password("pencil", mechanism)
    assert not credential.matches_password("pencil!", mechanism)


def test_kafkas_text_form_round_trips_and_never_shows_the_keys() -> None:
    credential = ScramCredential.generate("s3cret", ScramMechanism.SCRAM_SHA_512, 4096)
    text = credential.to_text()
    assert text.startswith("salt=")
    assert text.endswith(",iterations=4096")
    assert ScramCredential.from_text(text) == credential
    assert repr(credential) == "ScramCredential(iterations=4096)"
    assert len(credential.stored_key) == 64
    assert len(credential.server_key) == 64
    other = ScramCredential.generate("s3cret", ScramMechanism.SCRAM_SHA_512, 4096)
    assert other.salt != credential.salt
    assert other.stored_key != credential.stored_key


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("salt=AA==,stored_key=AA==", "has salt, stored_key, server_key and iterations"),
        ("salt=AA==,stored_key=AA==,server_key=!!,iterations=4096", "not base64"),
        ("salt=AA==,stored_key=AA==,server_key=AA==,iterations=100", "100 iterations (fewer than 4096)"),
        ("garbage", "a SCRAM credential is salt="),
    ],
)
def test_a_bad_text_form_is_named(text: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        ScramCredential.from_text(text)
    assert message in str(info.value)


def test_too_few_iterations_and_unknown_mechanisms_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 4096 iterations, got 10"):
        ScramCredential.generate("p", ScramMechanism.SCRAM_SHA_256, 10)
    with pytest.raises(ValueError, match="'SCRAM-SHA-1' is not a SCRAM mechanism"):
        ScramMechanism.of("SCRAM-SHA-1")
