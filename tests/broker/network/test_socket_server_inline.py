"""The socket server's inline serving (InlineHandler, real sockets on 127.0.0.1): requests answered on the
processor thread in order with handed-over ones, answers given later, pipelining behind a waiting request and
its bounds, the answers of buffered pipeline requests leaving in one send (to a slow reader, a peer that goes
away mid-send, over TLS), and an inline handler's failure closing only its connection."""

from __future__ import annotations

import array
import contextlib
import fcntl
import logging
import os
import socket
import ssl
import struct
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.endpoint import SecurityProtocol
from broker.network.inline_serving import PIPELINED_MAX_BYTES
from broker.network.request_channel import InlineHandler, NetworkRequest, NetworkResponse, RequestChannel
from broker.network.ssl_factory import server_ssl_context
from broker.protocol.frame import framed
from lumber.dev.dev_certificates import CertificateAuthority
from tests.broker.network.helpers import (
    CLOSE,
    ECHO,
    ECHO_THEN_CLOSE,
    EMPTY,
    NETWORK_LOGGER,
    commands,
    echo,
    is_open,
    read_until_closed,
    recv_exact,
    recv_frame,
    request_frame,
    send_request,
    serving,
    wait_until,
)

# -- requests served on the processor thread (InlineHandler) ----------------------------------------------

#: Test api keys: echoed by a handler thread (not inline), answered later from another thread, held
#: unanswered until the test releases them (:meth:`_Inline.release`), and echoed followed by
#: :data:`_LARGE_BYTES` bytes (an answer far larger than its request), and echoed after releasing the held
#: ones (on the processor's thread, so that their answers and its own reach the processor in one list).
_HANDED_OVER, _LATER, _HELD, _LARGE, _RELEASE = 6, 7, 8, 9, 10
_LARGE_BYTES = 1024 * 1024


def _large_answer(frame: bytes) -> bytes:
    """What :data:`_LARGE` answers to ``frame``: the frame, then ``_LARGE_BYTES`` of its correlation id's
    last byte."""
    return framed(frame + bytes([frame[7]]) * _LARGE_BYTES)


class _Inline:
    """An inline handler answering like :func:`commands`, recording the thread and order of each request."""

    def __init__(self, channel: RequestChannel) -> None:
        self.channel = channel
        self.served: list[tuple[int, str]] = []
        self.later: list[NetworkRequest] = []
        self.held: list[NetworkRequest] = []

    def release(self) -> None:
        """Answer the held requests (echo), from this (another) thread."""
        held, self.held = self.held, []
        for request in held:
            self.channel.send_response(echo(request))

    def handle(self, request: NetworkRequest) -> None:
        (api_key, _version, correlation_id) = struct.unpack_from(">hhi", request.frame, 0)
        self.served.append((correlation_id, threading.current_thread().name))
        if api_key == _LATER:
            self.later.append(request)
            threading.Timer(0.2, lambda: self.channel.send_response(echo(request))).start()
            return
        if api_key == _HELD:
            self.held.append(request)
            return
        if api_key == CLOSE + 100:
            raise RuntimeError("the inline handler failed")
        if api_key == _RELEASE:
            self.release()
        if api_key == _LARGE:
            self.channel.send_response(NetworkResponse(request, (_large_answer(request.frame),)))
            return
        response = commands(request)
        if response is not None:
            self.channel.send_response(response)


@contextlib.contextmanager
def _serving_inline(
    keys: set[int],
    pipeline: frozenset[int] = frozenset(),
    *,
    groups: list[list[int]] | None = None,
    serving_block: Any = None,
    **server_args: Any,
) -> Iterator[tuple[Any, _Inline]]:
    """Serve ``keys`` inline; with ``groups``, the handler also serves pipelined requests together
    (``handle_pipelined``: one at a time here), and each call's correlation ids are appended to it; with
    ``serving_block``, that is the handler's ``serving``."""
    channel_box: list[_Inline] = []

    def handle(request: NetworkRequest) -> None:
        channel_box[0].handle(request)

    def handle_pipelined(requests: Iterator[NetworkRequest]) -> None:
        assert groups is not None
        taken: list[int] = []
        groups.append(taken)
        for request in requests:
            taken.append(struct.unpack_from(">i", request.frame, 4)[0])
            channel_box[0].handle(request)

    handler = InlineHandler(
        handle,
        frozenset(keys),
        pipeline_api_keys=pipeline,
        handle_pipelined=None if groups is None else handle_pipelined,
        serving=serving_block,
    )
    with serving(inline=handler, num_processors=1, **server_args) as served:
        inline = _Inline(served.channel)
        channel_box.append(inline)
        yield served, inline


def test_the_serving_block_ends_once_the_turns_answers_are_written() -> None:
    # what a handler defers to the end of its serving block (the server's purgatory checks: the fetches an
    # append woke) must not hold back the answers of the turn: at each end of the block, every request
    # served so far has its answer in the client's socket already
    client: list[socket.socket] = []
    ends: list[tuple[str, int, int]] = []
    box: list[_Inline] = []

    @contextlib.contextmanager
    def block() -> Iterator[None]:
        yield
        if client and box:
            held = array.array("i", [0])
            fcntl.ioctl(client[0].fileno(), termios.FIONREAD, held)  # bytes the client may read now
            ends.append((threading.current_thread().name, len(box[0].served), held[0]))

    with _serving_inline({ECHO}, serving_block=block) as (served, inline):
        box.append(inline)
        sock = served.connect()
        client.append(sock)
        frames = [request_frame(i, bytes([i]) * 40, api_key=ECHO) for i in range(3)]
        sock.sendall(b"".join(framed(f) for f in frames))
        wait_until(lambda: bool(ends) and ends[-1][1] == 3, what="the turn that served the last request")
        answers = [len(framed(f)) for f in frames]
        for thread, served_then, held in ends:
            assert thread == inline.served[0][1]  # the processor's thread
            assert held == sum(answers[:served_then])
        assert [recv_frame(sock) for _ in frames] == frames


def test_inline_requests_are_served_by_the_processor_in_order_with_handed_over_ones() -> None:
    with _serving_inline({ECHO, EMPTY}) as (served, inline):
        sock = served.connect()
        kinds = [(ECHO, EMPTY, _HANDED_OVER)[i % 3] if i % 5 else ECHO for i in range(600)]
        frames = [request_frame(i, i.to_bytes(4, "big") * (i % 9), api_key=k) for i, k in enumerate(kinds)]
        sock.sendall(b"".join(framed(f) for f in frames))
        answered = [f for f, k in zip(frames, kinds, strict=True) if k != EMPTY]
        assert [recv_frame(sock) for _ in answered] == answered
        inline_ids = [i for i, k in enumerate(kinds) if k in (ECHO, EMPTY)]
        assert [cid for cid, _ in inline.served] == inline_ids
        assert {name for _, name in inline.served} == {f"{served.name}-network-processor-0"}
        handed = [struct.unpack_from(">i", r.frame, 4)[0] for r in served.handlers.handled]
        assert handed == [i for i, k in enumerate(kinds) if k == _HANDED_OVER]
        served.wait_stat("responses_sent", len(answered))
        stats = served.stats()
        assert stats["requests"] == 600
        assert stats["responses_empty"] == kinds.count(EMPTY)
        assert stats["request_bytes"] == sum(4 + len(f) for f in frames)
        assert is_open(sock)


def test_an_inline_request_answered_later_holds_back_the_next_one() -> None:
    with _serving_inline({ECHO, _LATER}) as (served, inline):
        sock = served.connect()
        later = request_frame(1, b"answered from a timer", api_key=_LATER)
        after = request_frame(2, b"pipelined behind it")
        sock.sendall(framed(later) + framed(after))
        time.sleep(0.1)
        assert [cid for cid, _ in inline.served] == [1]  # muted: the second is not served yet
        assert recv_frame(sock) == later
        assert recv_frame(sock) == after
        assert [cid for cid, _ in inline.served] == [1, 2]
        # another connection is served meanwhile: the delay mutes only its own connection
        other = served.connect()
        sock.sendall(framed(request_frame(3, api_key=_LATER)))
        send_request(other, request_frame(4, b"not held back"))
        assert recv_frame(other) == request_frame(4, b"not held back")
        assert recv_frame(sock) == request_frame(3, api_key=_LATER)


def test_buffered_requests_are_pipelined_behind_one_answered_later_and_answered_in_order() -> None:
    """Read-ahead pipelining: the requests already buffered behind one that waits are served at once (an
    acks=-1 Produce waiting for its group commit: one fsync then answers them all), in request order."""
    with _serving_inline({ECHO, EMPTY, CLOSE, _LATER}, frozenset({ECHO, EMPTY, CLOSE, _LATER})) as (
        served,
        inline,
    ):
        sock = served.connect()
        kinds = [_LATER, ECHO, EMPTY, _LATER, ECHO]
        frames = [request_frame(i, b"p%d" % i, api_key=k) for i, k in enumerate(kinds, start=1)]
        sock.sendall(b"".join(framed(f) for f in frames))
        wait_until(lambda: len(inline.served) == 5, 5, "every buffered request to be served")
        assert [cid for cid, _ in inline.served] == [1, 2, 3, 4, 5]  # before the first one's answer
        assert [recv_frame(sock) for _ in range(4)] == [frames[0], frames[1], frames[3], frames[4]]
        send_request(sock, request_frame(6, b"after the pipeline"))
        assert recv_frame(sock) == request_frame(6, b"after the pipeline")
        served.wait_stat("responses_empty", 1)
        assert served.stats()["requests"] == 6
        # a request that closes the connection ends the pipeline: nothing after it is served
        other = served.connect()
        doomed = [request_frame(7, api_key=_LATER), request_frame(8, api_key=CLOSE), request_frame(9, b"no")]
        other.sendall(b"".join(framed(f) for f in doomed))
        assert recv_frame(other) == doomed[0]
        assert read_until_closed(other) == b""
        assert [cid for cid, _ in inline.served][6:] == [7, 8]


def test_requests_larger_than_the_read_ahead_buffer_are_read_and_pipelined_behind_a_waiting_one() -> None:
    """Reading ahead: behind a request that waits, pipeline requests larger than the 128 KiB read-ahead
    buffer (never whole in it) are read from the socket and served before its answer; a request of another
    api key behind them is not read until every one before it is answered; answers in request order."""
    with _serving_inline({ECHO, EMPTY, _HELD}, frozenset({ECHO, _HELD})) as (served, inline):
        sock = served.connect()
        big = [request_frame(i, bytes([i]) * (300 * 1024)) for i in (2, 3)]
        held = request_frame(1, b"held", api_key=_HELD)
        other = request_frame(4, b"not a pipeline request", api_key=EMPTY)
        after = request_frame(5, b"echoed after it")
        sock.sendall(b"".join(framed(f) for f in [held, *big, other, after]))
        wait_until(lambda: len(inline.served) == 3, 5, "both large requests to be served behind the held one")
        time.sleep(0.2)
        assert [cid for cid, _ in inline.served] == [1, 2, 3]
        assert served.stats()["requests_read_ahead"] == 2
        assert [r.frame for r in inline.held] == [held]
        inline.release()
        assert [recv_frame(sock) for _ in range(3)] == [held, *big]
        assert recv_frame(sock) == after
        assert [cid for cid, _ in inline.served] == [1, 2, 3, 4, 5]
        stats = served.stats()
        assert stats["requests"] == 5
        assert stats["requests_read_ahead"] == 2
        assert stats["responses_empty"] == 1
        assert stats["request_bytes"] == sum(4 + len(f) for f in [held, *big, other, after])


def test_reading_ahead_stops_at_the_pipelined_bytes_bound_per_connection() -> None:
    """Behind a waiting request, reading ahead serves requests until their frames hold
    PIPELINED_MAX_BYTES; the rest is read once the earlier answers are sent, still in order."""
    with _serving_inline({ECHO, _HELD}, frozenset({ECHO, _HELD})) as (served, inline):
        sock = served.connect()
        piece = PIPELINED_MAX_BYTES // 3 + 1  # three pieces reach the bound
        frames = [request_frame(1, b"held", api_key=_HELD)]
        frames += [request_frame(i, bytes([i]) * piece) for i in range(2, 7)]
        sender = threading.Thread(target=sock.sendall, args=(b"".join(framed(f) for f in frames),))
        sender.start()
        wait_until(lambda: len(inline.served) == 4, 10, "three requests to be served behind the held one")
        time.sleep(0.3)
        assert [cid for cid, _ in inline.served] == [1, 2, 3, 4]
        inline.release()
        assert [recv_frame(sock) for _ in frames] == frames
        sender.join(10)
        assert [cid for cid, _ in inline.served] == [1, 2, 3, 4, 5, 6]
        assert served.stats()["requests"] == 6


def test_an_answer_larger_than_the_socket_buffer_to_a_pipeline_request_is_sent_whole() -> None:
    """A pipeline request answered at once with more than the socket takes: the connection waits for
    writing (it does not read ahead while a response is being sent), and the next request is served after."""
    with _serving_inline({ECHO}, frozenset({ECHO})) as (served, _inline):
        sock = served.connect()
        big = request_frame(1, os.urandom(8 * 1024 * 1024))
        send_request(sock, big)
        time.sleep(0.2)  # the answer fills the socket buffers before the client reads
        assert recv_frame(sock) == big
        send_request(sock, request_frame(2, b"next"))
        assert recv_frame(sock) == request_frame(2, b"next")


def test_a_peer_closing_its_end_while_reading_ahead_still_gets_every_answer() -> None:
    """A client that sends its pipelined requests and shuts down its sending side: the end of stream is
    seen while the first request waits, and the connection is closed only after every answer is sent."""
    with _serving_inline({ECHO, _HELD}, frozenset({ECHO, _HELD})) as (served, inline):
        sock = served.connect()
        frames = [request_frame(1, api_key=_HELD), request_frame(2, b"x" * 200_000)]
        sock.sendall(b"".join(framed(f) for f in frames))
        sock.shutdown(socket.SHUT_WR)
        wait_until(lambda: len(inline.served) == 2, 5, "the request behind the held one to be served")
        inline.release()
        assert [recv_frame(sock) for _ in frames] == frames
        assert read_until_closed(sock) == b""
        served.wait_stat("peer_closed", 1)


def test_an_inline_handler_failing_closes_only_its_connection(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=NETWORK_LOGGER)
    with _serving_inline({ECHO, CLOSE, CLOSE + 100}) as (served, _inline):
        failing, closing, fine = served.connect(), served.connect(), served.connect()
        send_request(failing, request_frame(1, api_key=CLOSE + 100))
        assert read_until_closed(failing) == b""
        wait_until(
            lambda: any(
                "serving a request from" in r.getMessage() and r.exc_info for r in list(caplog.records)
            ),
            what="the handler's failure logged with its traceback",
        )
        send_request(closing, request_frame(2, api_key=CLOSE))
        assert read_until_closed(closing) == b""
        send_request(fine, request_frame(3, b"still served"))
        assert recv_frame(fine) == request_frame(3, b"still served")
        served.wait_stat("connections_open", 1)


def test_runs_are_taken_one_request_at_a_time_and_the_rest_served_alone_in_order() -> None:
    """``handle_run`` gets a buffered run as an iterator and serves its leading requests that need no
    answer (EMPTY); the first it refuses (ECHO) is served alone by ``handle``, then the requests behind it
    are offered as a run again. Every request is served once, in order, and a run refused at its first
    request takes that request only (a producer's ``acks=1`` requests pipelined behind each other)."""
    taken: list[tuple[int, int]] = []  # (requests taken, requests served) per handle_run call
    order: list[int] = []
    box: list[RequestChannel] = []

    def handle(request: NetworkRequest) -> None:
        order.append(struct.unpack_from(">i", request.frame, 4)[0])
        response = commands(request)
        if response is not None:
            box[0].send_response(response)

    def handle_run(requests: Iterator[NetworkRequest]) -> int:
        assert not isinstance(requests, list | tuple)  # taken lazily, never cut all at once
        took = served = 0
        for request in requests:
            took += 1
            if struct.unpack_from(">h", request.frame, 0)[0] != EMPTY:
                break
            order.append(struct.unpack_from(">i", request.frame, 4)[0])
            served += 1
        taken.append((took, served))
        return served

    keys = frozenset({ECHO, EMPTY})
    handler = InlineHandler(handle, keys, handle_run, run_api_keys=keys)
    with serving(inline=handler, num_processors=1) as served_by:
        box.append(served_by.channel)
        sock = served_by.connect()
        kinds = [ECHO] * 300 + [EMPTY] * 40 + [ECHO] * 2 + [EMPTY] * 5 + [ECHO]
        frames = [request_frame(i, b"r%d" % i, api_key=k) for i, k in enumerate(kinds)]
        sock.sendall(b"".join(framed(f) for f in frames))
        echoed = [f for f, k in zip(frames, kinds, strict=True) if k == ECHO]
        assert [recv_frame(sock) for _ in echoed] == echoed
        served_by.wait_stat("requests", len(frames))
        assert order == list(range(len(frames)))
        assert all(took <= served + 1 for took, served in taken)
        assert sum(served for _, served in taken) == 45
        stats = served_by.stats()
        assert stats["responses_empty"] == 45
        assert stats["request_bytes"] == sum(4 + len(f) for f in frames)


# -- the answers of buffered pipeline requests in one send ------------------------------------------------


def test_answers_to_buffered_pipeline_requests_answered_at_once_leave_in_one_send_in_request_order() -> None:
    """A producer's acks=1 requests arriving together (one read): each is served at once, and their
    answers go out as one send, byte for byte in request order; empty answers (acks=0) between them add
    nothing; the connection then serves its next request as before."""
    with _serving_inline({ECHO, EMPTY}, frozenset({ECHO, EMPTY})) as (served, inline):
        sock = served.connect()
        kinds = [EMPTY if i % 7 == 3 else ECHO for i in range(40)]
        frames = [request_frame(i, b"r%d" % i * (i % 5), api_key=k) for i, k in enumerate(kinds)]
        sock.sendall(b"".join(framed(f) for f in frames))  # 1.5 KB: one segment, one read
        echoed = [framed(f) for f, k in zip(frames, kinds, strict=True) if k == ECHO]
        assert recv_exact(sock, sum(map(len, echoed))) == b"".join(echoed)
        assert [cid for cid, _ in inline.served] == list(range(40))
        served.wait_stat("responses_sent", len(echoed))
        stats = served.stats()
        assert stats["responses_merged"] == len(echoed) - 1  # one send for all of them
        assert stats["responses_empty"] == kinds.count(EMPTY)
        assert stats["requests"] == 40
        send_request(sock, request_frame(40, b"next"))
        assert recv_frame(sock) == request_frame(40, b"next")
        served.wait_stat("responses_sent", len(echoed) + 1)
        assert served.stats()["responses_merged"] == len(echoed) - 1


def test_buffered_pipeline_requests_are_given_together_up_to_an_answer_that_closes() -> None:
    """A read's pipeline requests go to ``handle_pipelined`` in one call, in order (the first in flight,
    the others pipelined behind it), their answers in one send in request order; the call is given no
    request after one whose answer closes the connection, and those are never served."""
    groups: list[list[int]] = []
    keys = {ECHO, EMPTY, ECHO_THEN_CLOSE}
    with _serving_inline(keys, frozenset(keys), groups=groups) as (served, inline):
        sock = served.connect()
        kinds = [EMPTY if i == 2 else ECHO for i in range(6)]
        frames = [request_frame(i, b"r%d" % i * i, api_key=k) for i, k in enumerate(kinds)]
        sock.sendall(b"".join(framed(f) for f in frames))  # one read
        echoed = [framed(f) for f, k in zip(frames, kinds, strict=True) if k == ECHO]
        assert recv_exact(sock, sum(map(len, echoed))) == b"".join(echoed)
        assert groups == [list(range(6))]
        served.wait_stat("responses_sent", len(echoed))
        assert served.stats()["responses_merged"] == len(echoed) - 1
        closing = request_frame(7, b"closes", api_key=ECHO_THEN_CLOSE)
        after = [request_frame(8, b"never served"), request_frame(9, b"nor this")]
        sock.sendall(b"".join(framed(f) for f in [request_frame(6, b"first"), closing, *after]))
        assert read_until_closed(sock) == framed(request_frame(6, b"first")) + framed(closing)
        assert groups == [list(range(6)), [6, 7]]
        assert [cid for cid, _ in inline.served] == list(range(8))


def test_a_send_of_several_answers_stops_at_one_not_given_yet_and_at_one_that_closes() -> None:
    """Answers after one not given yet (an acks=-1 request waiting) wait for it, then leave together;
    an answer that closes the connection ends the send and nothing after it is served."""
    keys = {ECHO, ECHO_THEN_CLOSE, _LATER}
    with _serving_inline(keys, frozenset(keys)) as (served, inline):
        sock = served.connect()
        kinds = [ECHO, ECHO, _LATER, ECHO, ECHO]
        frames = [request_frame(i, b"m%d" % i, api_key=k) for i, k in enumerate(kinds)]
        sock.sendall(b"".join(framed(f) for f in frames))
        expected = b"".join(framed(f) for f in frames)
        assert recv_exact(sock, len(expected)) == expected
        served.wait_stat("responses_sent", 5)
        assert served.stats()["responses_merged"] == 3  # [0, 1] then [2, 3, 4]
        other = served.connect()
        doomed = [request_frame(5), request_frame(6, api_key=ECHO_THEN_CLOSE), request_frame(7, b"never")]
        other.sendall(b"".join(framed(f) for f in doomed))
        assert read_until_closed(other) == framed(doomed[0]) + framed(doomed[1])
        assert [cid for cid, _ in inline.served][5:] == [5, 6]
        served.wait_stat("response_closed", 1)
        assert served.stats()["responses_merged"] == 4


def test_one_send_of_answers_larger_than_the_socket_buffers_reaches_a_slow_reader_whole() -> None:
    """Six answers of 1 MiB to requests that arrived together: one send, far more than the socket takes;
    the client reads only after a pause, and gets every byte in order; the connection goes on."""
    with _serving_inline({ECHO, _LARGE}, frozenset({ECHO, _LARGE})) as (served, _inline):
        sock = served.connect()
        frames = [request_frame(i, api_key=_LARGE) for i in range(1, 7)]
        sock.sendall(b"".join(framed(f) for f in frames))
        time.sleep(0.3)  # the send fills the socket buffers and waits for writing
        for frame in frames:
            assert recv_exact(sock, 4 + 8 + _LARGE_BYTES) == _large_answer(frame)
        served.wait_stat("responses_sent", 6)
        assert served.stats()["responses_merged"] == 5
        send_request(sock, request_frame(7, b"after"))
        assert recv_frame(sock) == request_frame(7, b"after")


def test_a_peer_going_away_in_the_middle_of_a_send_of_several_answers_closes_only_its_connection() -> None:
    with _serving_inline({ECHO, _LARGE}, frozenset({ECHO, _LARGE})) as (served, _inline):
        leaving, staying = served.connect(), served.connect()
        frames = [request_frame(i, api_key=_LARGE) for i in range(1, 7)]
        leaving.sendall(b"".join(framed(f) for f in frames))
        assert recv_exact(leaving, 4 + 8 + 1000) == _large_answer(frames[0])[:1012]
        leaving.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        leaving.close()  # a reset, with most of the send still to go
        served.wait_stat("peer_closed", 1)
        stats = served.stats()
        assert stats["responses_sent"] == 0
        assert stats["connections_open"] == 1
        send_request(staying, request_frame(7, b"still served"))
        assert recv_frame(staying) == request_frame(7, b"still served")


def test_answers_to_buffered_pipeline_requests_leave_in_one_send_over_tls(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path / "ca")
    issued = ca.issue("broker")
    context = server_ssl_context(certfile=str(issued.certfile), keyfile=str(issued.keyfile))
    server_args: dict[str, Any] = {
        "ssl_context": context,
        "security_protocol": SecurityProtocol.SSL,
        "listener_name": "SSL",
    }
    with _serving_inline({ECHO, _LARGE}, frozenset({ECHO, _LARGE}), **server_args) as (served, _inline):
        client_context = ssl.create_default_context(cafile=str(ca.cafile))
        raw = socket.create_connection(("127.0.0.1", served.port), timeout=5)
        with client_context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            frames = [request_frame(i, b"t%d" % i * i) for i in range(20)]
            frames[7] = request_frame(7, api_key=_LARGE)
            tls.sendall(b"".join(framed(f) for f in frames))  # one TLS record
            expected = b"".join(_large_answer(f) if i == 7 else framed(f) for i, f in enumerate(frames))
            assert recv_exact(tls, len(expected)) == expected
            served.wait_stat("responses_sent", 20)
            assert served.stats()["responses_merged"] == 19
            tls.sendall(framed(request_frame(20, b"next")))
            assert recv_frame(tls) == request_frame(20, b"next")


def test_answers_given_together_to_a_waiting_request_and_those_behind_it_leave_in_one_send() -> None:
    """An acks=-1 request and the ones pipelined behind it answered together (one group commit): the
    waiting request's answer starts its send only after the others in the same list are given, so all
    leave in one send."""
    keys = {ECHO, _HELD, _RELEASE}
    with _serving_inline(keys, frozenset(keys)) as (served, inline):
        sock = served.connect()
        frames = [request_frame(i, b"h%d" % i, api_key=_HELD) for i in range(1, 4)]
        frames.append(request_frame(4, b"answers them all", api_key=_RELEASE))
        sock.sendall(b"".join(framed(f) for f in frames))
        expected = b"".join(framed(f) for f in frames)
        assert recv_exact(sock, len(expected)) == expected
        assert [cid for cid, _ in inline.served] == [1, 2, 3, 4]
        served.wait_stat("responses_sent", 4)
        assert served.stats()["responses_merged"] == 3
