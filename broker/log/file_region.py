"""What a log read returns: whole record batches as a byte range of one segment file, ready for sendfile.

The region keeps its own reference to the segment's open :class:`~broker.log.file_handle.FileHandle`, so
it stays readable even if retention deletes the segment meanwhile (the file is unlinked, the descriptor
lives until the region is dropped).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from broker.log.errors import LogStorageError
from broker.log.file_handle import FileHandle


@dataclass(frozen=True, slots=True)
class FileRegion:
    """``size_bytes`` bytes at ``position`` of ``file``: whole batches, the first one at ``base_offset``."""

    file: FileHandle
    position: int
    size_bytes: int
    #: Base offset of the first batch in the region (it may be below the offset that was asked for).
    base_offset: int
    #: The offset after the region's last batch: where the next read continues.
    next_offset: int

    def fileno(self) -> int:
        return self.file.fileno()

    def read_bytes(self) -> bytes:
        """The region's bytes, read into memory (for clients and tests; the server uses sendfile)."""
        data = self.file.pread(self.size_bytes, self.position)
        if len(data) != self.size_bytes:
            raise LogStorageError(
                f"{self.file.path}: region [{self.position}, {self.position + self.size_bytes}) "
                f"ends past the end of the file ({len(data)} bytes read)"
            )
        return data

    def send_to(self, sock: socket.socket) -> int:
        """Send the whole region on a blocking socket with ``socket.sendfile``; returns bytes sent."""
        return sock.sendfile(self.file, self.position, self.size_bytes)  # type: ignore[arg-type]

    def transfer_to(self, out_fd: int, sent_bytes: int = 0) -> int:
        """One ``os.sendfile`` of the rest of the region after ``sent_bytes``; returns the bytes it sent.

        For non-blocking sockets: raises :class:`BlockingIOError` when the socket would block, as
        ``os.sendfile`` does; the caller loops until ``sent_bytes == size_bytes``.
        """
        remaining = self.size_bytes - sent_bytes
        if remaining <= 0:
            return 0
        return os.sendfile(out_fd, self.file.fileno(), self.position + sent_bytes, remaining)
