"""The request channel: a bounded request queue for the handlers, responses routed back by processor id."""

from __future__ import annotations

import threading
import time

import pytest

from broker.network.errors import ChannelClosedError, NetworkConfigError
from broker.network.request_channel import NetworkRequest, NetworkResponse, RequestChannel
from tests.broker.network.helpers import wait_until


def _request(index: int, processor_id: int = 0) -> NetworkRequest:
    return NetworkRequest(processor_id, f"local-peer-{index}", "127.0.0.1:1", index.to_bytes(8, "big"), index)


class RecordingSink:
    """A processor stand-in that keeps what it is given (the channel only calls enqueue_response)."""

    def __init__(self) -> None:
        self.responses: list[NetworkResponse] = []

    def enqueue_response(self, response: NetworkResponse) -> None:
        self.responses.append(response)


def test_requests_come_out_in_order() -> None:
    channel = RequestChannel(queue_size=10)
    for index in range(10):
        channel.send_request(_request(index))
    assert channel.pending_requests() == 10
    received = [channel.receive_request(1) for _ in range(10)]
    assert received == [_request(index) for index in range(10)]
    assert channel.receive_request(0.01) is None


def test_receive_waits_for_a_request_or_its_timeout() -> None:
    channel = RequestChannel()
    started = time.monotonic()
    assert channel.receive_request(0.1) is None
    assert time.monotonic() - started >= 0.09
    threading.Timer(0.05, channel.send_request, (_request(1),)).start()
    assert channel.receive_request(5) == _request(1)


def test_a_full_queue_holds_senders_back() -> None:
    channel = RequestChannel(queue_size=2)
    channel.send_request(_request(0))
    channel.send_request(_request(1))
    assert channel.offer_request(_request(2), 0.05) is False
    done = threading.Event()

    def send() -> None:
        channel.send_request(_request(2))
        done.set()

    sender = threading.Thread(target=send)
    sender.start()
    assert not done.wait(0.1)
    assert channel.receive_request(1) == _request(0)
    assert done.wait(5)
    sender.join()
    assert channel.offer_request(_request(3), 0.05) is False
    assert [channel.receive_request(1) for _ in range(2)] == [_request(1), _request(2)]
    assert channel.offer_request(_request(3), 0.05) is True


def test_close_wakes_everyone_and_refuses_requests() -> None:
    channel = RequestChannel(queue_size=1)
    channel.send_request(_request(0))
    failures: list[BaseException] = []

    def blocked_sender() -> None:
        try:
            channel.send_request(_request(1))
        except ChannelClosedError as exc:
            failures.append(exc)

    sender = threading.Thread(target=blocked_sender)
    sender.start()
    time.sleep(0.05)
    channel.close()
    sender.join(5)
    assert len(failures) == 1
    assert channel.closed
    assert channel.receive_request(5) is None  # at once, and the queued request is gone
    assert channel.pending_requests() == 0
    with pytest.raises(ChannelClosedError):
        channel.send_request(_request(2))
    with pytest.raises(ChannelClosedError):
        channel.offer_request(_request(2), 1)
    channel.close()  # idempotent


def test_a_blocked_receiver_returns_none_on_close() -> None:
    channel = RequestChannel()
    results: list[NetworkRequest | None] = []
    receiver = threading.Thread(target=lambda: results.append(channel.receive_request(10)))
    receiver.start()
    time.sleep(0.05)
    started = time.monotonic()
    channel.close()
    receiver.join(5)
    assert results == [None]
    assert time.monotonic() - started < 1


def test_responses_go_to_the_processor_of_their_request() -> None:
    channel = RequestChannel()
    first, second = RecordingSink(), RecordingSink()
    first_id, second_id = channel.allocate_processor_id(), channel.allocate_processor_id()
    assert first_id != second_id
    channel.register_processor(first_id, first)
    channel.register_processor(second_id, second)
    to_first = NetworkResponse(_request(1, first_id), (b"one",))
    to_second = NetworkResponse(_request(2, second_id))
    channel.send_response(to_first)
    channel.send_response(to_second)
    assert first.responses == [to_first]
    assert second.responses == [to_second]
    channel.unregister_processor(second_id)
    channel.send_response(to_second)  # dropped quietly
    assert second.responses == [to_second]
    with pytest.raises(NetworkConfigError):
        channel.register_processor(first_id, RecordingSink())
    channel.close()
    channel.send_response(to_first)  # still routed after close: a handler may finish its last request
    assert first.responses == [to_first, to_first]


def test_bad_queue_size() -> None:
    with pytest.raises(NetworkConfigError):
        RequestChannel(queue_size=0)


def test_many_handlers_take_every_request_once() -> None:
    channel = RequestChannel(queue_size=8)
    taken: list[NetworkRequest] = []
    lock = threading.Lock()
    stop = threading.Event()

    def handler() -> None:
        while not stop.is_set():
            request = channel.receive_request(0.05)
            if request is not None:
                with lock:
                    taken.append(request)

    handlers = [threading.Thread(target=handler) for _ in range(4)]
    for thread in handlers:
        thread.start()
    for index in range(2000):
        channel.send_request(_request(index))
    wait_until(lambda: len(taken) == 2000)
    stop.set()
    for thread in handlers:
        thread.join(5)
    assert sorted(r.received_ns for r in taken) == list(range(2000))
