"""Fuzzing the HTTP API of a real registry process: no 5xx, and the right errors for bad schemas.

* schemathesis generates requests for every operation of our OpenAPI description, both fitting it (positive)
  and breaking it (negative: wrong types, missing fields, odd strings in paths): no answer may be a 5xx, and
  every error answer is a Confluent error body. Generated ids and subjects mostly name nothing (404), so
  each positive request is sent a second time aimed at a schema that exists: one nested as deep as the
  registry accepts (``normalize.MAX_DEPTH``), which once registered and then failed to be served (a 500).
* hypothesis generates Avro-ish schemas (valid, invalid and evolving ones) registered into one subject: each
  answer is an id, a 42201 that says what is wrong, or a 409 that names the rule that failed.

Bounded and repeatable: a fixed number of examples per operation, derandomized (the same examples every
run), no shrinking, no example database.
"""

from __future__ import annotations

import json
import string
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from schemas.normalize import MAX_DEPTH
from tests.schemas.conftest import RegistryProcess
from tests.support.registry import nested_record

EXAMPLES_PER_OPERATION = 12
RULE_PHRASES = (
    "cannot be promoted to reader type",
    "cannot be read as reader type",
    "has no default and the writer has no field",
    "are not in reader enum",
    "has size",
    "does not match reader",
    "is not in the reader's union",
)
FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES_PER_OPERATION,
    derandomize=True,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)


def check_answer(response: Any, what: str) -> None:
    assert response.status_code < 500, f"{what}: HTTP {response.status_code}: {response.text[:500]}"
    if response.status_code >= 400:
        body = response.json()
        assert isinstance(body.get("error_code"), int), f"{what}: not an error body: {response.text[:300]}"
        assert isinstance(body.get("message"), str)
        assert body["message"], f"{what}: empty error message"


# schemathesis's negative-case strategies call the random module inside a strategy, which Hypothesis
# deprecates; the warning is about schemathesis's code, not the registry's answers
@pytest.mark.filterwarnings(
    "ignore:Do not use the `random` module inside strategies:hypothesis.errors.HypothesisDeprecationWarning"
)
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_server_errors_for_any_request(shared_registry: RegistryProcess, mode: GenerationMode) -> None:
    url = shared_registry.url
    deep_subject = f"fuzz-deep-{mode.value}-value"
    registered = httpx.post(
        f"{url}/subjects/{deep_subject}/versions", json={"schema": nested_record(MAX_DEPTH)}, timeout=30
    )
    assert registered.status_code == 200, registered.text
    known = {"id": str(registered.json()["id"]), "subject": deep_subject, "version": "1"}
    api = schemathesis.openapi.from_url(f"{url}/openapi.json", timeout=30)
    operations = [result.ok() for result in api.get_all_operations()]  # type: ignore[union-attr]
    assert len(operations) == 21
    fuzzed = [op.label for op in operations if fuzz_operation(op, mode, url, known)]
    if mode is GenerationMode.POSITIVE:
        assert len(fuzzed) == 21
    else:
        # only operations with a body or a non-string parameter can be sent data that breaks the description
        assert len(fuzzed) >= 14, fuzzed


def fuzz_operation(operation: Any, mode: GenerationMode, url: str, known: dict[str, str]) -> bool:
    """Fuzz one operation; False if no request can be generated in this mode (nothing to break). A positive
    request with an ``id``, ``subject`` or ``version`` in its path is also sent with ``known`` ones."""

    @FUZZ_SETTINGS
    @given(case=operation.as_strategy(generation_mode=mode))
    def fuzz(case: Any) -> None:
        response = case.call(base_url=url, timeout=30)
        check_answer(response, f"{operation.method.upper()} {case.formatted_path}")
        generated = dict(case.path_parameters or {})
        if mode is GenerationMode.POSITIVE and set(generated) & set(known):
            case.path_parameters = {name: known.get(name, value) for name, value in generated.items()}
            response = case.call(base_url=url, timeout=30)
            check_answer(response, f"{operation.method.upper()} {case.formatted_path}")

    try:
        fuzz()
    except Unsatisfiable:
        if mode is GenerationMode.POSITIVE:
            raise
        return False
    return True


NAMES = st.sampled_from(["a", "b", "c", "id", "n", "1bad", "", "x.y"])
PRIMITIVE = st.sampled_from(["null", "boolean", "int", "long", "float", "double", "bytes", "string", "nope"])


def avroish(depth: int = 0) -> st.SearchStrategy[Any]:
    leaves = PRIMITIVE | st.builds(
        lambda name, symbols: {"type": "enum", "name": name, "symbols": symbols},
        st.sampled_from(["E", "F"]),
        st.lists(st.sampled_from(["A", "B", "C", "a b"]), min_size=0, max_size=3),
    )
    if depth >= 2:
        return leaves
    inner = avroish(depth + 1)
    field: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
        {"name": NAMES, "type": inner},
        optional={"default": st.sampled_from([None, 0, "", 1.5, [], {}])},
    )
    return (
        leaves
        | st.builds(lambda items: {"type": "array", "items": items}, inner)
        | st.builds(lambda values: {"type": "map", "values": values}, inner)
        | st.lists(inner, min_size=1, max_size=3)
        | st.builds(
            lambda name, fields: {"type": "record", "name": name, "fields": fields},
            st.sampled_from(["R", "S"]),
            st.lists(field, max_size=3),
        )
    )


SCHEMA_TEXTS = st.one_of(
    st.builds(json.dumps, avroish()),
    st.builds(lambda v: json.dumps(v)[: max(1, len(json.dumps(v)) // 2)], avroish()),  # truncated
    st.text(alphabet=string.printable, max_size=40),
)


def test_schemas_get_an_id_a_42201_reason_or_a_409_rule(
    shared_registry: RegistryProcess, subject: str
) -> None:
    url = f"{shared_registry.url}/subjects/{subject}/versions"
    outcomes: dict[int, int] = {}
    with httpx.Client(timeout=30) as client:

        @settings(
            max_examples=150,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(text=SCHEMA_TEXTS)
        def fuzz(text: str) -> None:
            response = client.post(url, json={"schema": text})
            check_answer(response, f"register {text!r}")
            outcomes[response.status_code] = outcomes.get(response.status_code, 0) + 1
            if response.status_code == 200:
                assert isinstance(response.json()["id"], int)
            elif response.status_code == 422:
                body = response.json()
                assert body["error_code"] == 42201
                assert body["message"].startswith("Invalid schema: ")
                assert len(body["message"]) > len("Invalid schema: ") + 5
            else:
                assert response.status_code == 409, response.text
                message = response.json()["message"]
                assert response.json()["error_code"] == 409
                assert any(phrase in message for phrase in RULE_PHRASES), message

        fuzz()
    # the generator reaches all three outcomes
    assert set(outcomes) == {200, 409, 422}, outcomes
