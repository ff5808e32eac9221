"""The int32 size prefix."""

from __future__ import annotations

import pytest

from broker.protocol.errors import FrameSizeError
from broker.protocol.frame import frame_size, framed


def test_framed_prefixes_the_size():
    assert framed(b"abc") == b"\x00\x00\x00\x03abc"
    assert frame_size(framed(b"abc")[:4], 100) == 3


@pytest.mark.parametrize(
    ("prefix", "message"),
    [
        (b"\xff\xff\xff\xff", r"frame size prefix -1 is negative"),
        (b"\x7f\xff\xff\xff", r"frame size prefix 2147483647 exceeds the limit of 1048576 bytes"),
    ],
)
def test_sizes_refused_before_reading(prefix, message):
    with pytest.raises(FrameSizeError, match=message):
        frame_size(prefix, 1024 * 1024)
