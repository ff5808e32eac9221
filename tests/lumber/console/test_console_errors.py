"""Bad input on the console: each answer is a clear page (or JSON) with the exact HTTP status, never a 500,
against the real stack of ``conftest.py``; and a record that is not Avro is shown raw, 400 as Avro."""

from __future__ import annotations

import pytest

from tests.lumber.console.conftest import ConsoleStack


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/topics/no_such_topic", 404, "no topic 'no_such_topic'"),
        ("/topics/bad%20name", 404, "no topic 'bad name'"),
        ("/topics/{topic}?partition=2", 404, "has 2 partitions (0..1): there is no partition 2"),
        (
            "/topics/{topic}?partition=99999999999999999999",
            404,
            "there is no partition 99999999999999999999",
        ),
        ("/topics/{topic}?partition=-1", 404, "there is no partition -1"),
        (
            "/topics/{topic}?partition=0&offset=8",
            400,
            "offset 8 is out of range for {topic}-0: its log holds",
        ),
        ("/topics/{topic}?partition=0&offset=-1", 400, "offset -1 is out of range"),
        ("/topics/{topic}?partition=0&offset=abc", 400, "parameter offset='abc'"),
        ("/topics/{topic}?partition=0&time=yesterday", 400, "parameter time='yesterday'"),
        ("/topics/{topic}?partition=0&time=1969-12-31T23:59:59", 400, "a time before 1970 holds no record"),
        ("/topics/{topic}?partition=0&offset=1&time=2026-11-22", 400, "give offset or time, not both"),
        ("/topics/{topic}?limit=0", 400, "parameter limit=0: expected 1 to 1000"),
        ("/topics/{topic}/0/7", 400, "no record at offset 7 of {topic}-0"),
        ("/topics/{topic}/0/6/value", 400, "is not Avro: {topic}-0@6: magic byte is 0x07 at offset 0"),
        ("/groups/no_such_group", 404, "no consumer group 'no_such_group'"),
        ("/groups/no_such_group?kind=kafka", 404, "no consumer group 'no_such_group' at the brokers'"),
        ("/groups/no_such_group?kind=nope", 400, "kind 'nope': expected one of zookeeper, kafka"),
        ("/schemas/no_such_subject", 404, "no subject 'no_such_subject'"),
        ("/schemas/{topic}-value?version=9", 404, "version 9"),
        ("/schemas/{topic}-value/diff?from=1", 400, "parameter to=None: Field required"),
        ("/schemas/ids/987654", 404, "no schema id 987654"),
        ("/audit?since=last%20week", 400, "parameter since='last week'"),
        ("/audit?window=0", 400, "parameter window='0': must be longer than 0"),
        ("/audit?since=2026-11-23&until=2026-11-22", 400, "must be after since"),
        ("/audit/{topic}/1795334400001?since=2026-11-22&until=2026-11-23", 404, "no audit window of topic"),
        ("/loads?job=../etc", 400, "job '../etc': a job name is letters"),
        ("/no/such/page", 404, "no page at /no/such/page"),
    ],
)
def test_bad_input_gets_a_clear_answer(
    console_stack: ConsoleStack, path: str, status: int, message: str
) -> None:
    path = path.replace("{topic}", console_stack.topic)
    message = message.replace("{topic}", console_stack.topic)
    page = console_stack.get(path)
    assert page.status_code == status, page.text
    assert page.headers["content-type"].startswith("text/html")
    assert message.replace("'", "&#x27;") in page.text, page.text
    separator = "&" if "?" in path else "?"
    answer = console_stack.get(path + separator + "format=json")
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/json", answer.text
    body = answer.json()
    assert body["status"] == status
    assert message in body["message"], body


def test_a_record_that_is_avro_comes_back_as_json(console_stack: ConsoleStack) -> None:
    answer = console_stack.get(f"/topics/{console_stack.topic}/0/3/value")
    assert answer.status_code == 200
    assert answer.json() == console_stack.values[0][3]
