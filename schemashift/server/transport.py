"""The WebSocket transport of `serve`: uvicorn's sans-I/O websockets protocol (its default),
except that a message over the size limit is read past, not buffered, and reaches the app as
an `Oversized` marker.

With the stock protocol a message over `ws_max_size` closes the connection (1009) before the
app sees it, so the client loses its session instead of getting `MESSAGE_TOO_LARGE`. Here the
payload of a frame beyond the message's remaining budget is dropped as it arrives (memory stays
bounded by the limit whatever the client sends), and `WireLimits` answers the marker with the
error frame; the session goes on.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Generator
from typing import Any

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.frames import Frame
from websockets.server import ServerProtocol
from websockets.streams import StreamReader

from schemashift.server.limits import Oversized

#: control frames carry at most this many bytes, so reads up to it are always kept
CONTROL_PAYLOAD_MAX = 125


class Dropped(bytes):
    """The payload of a frame that was read past: empty, with the size it had."""

    size: int

    def __new__(cls, size: int) -> Dropped:
        payload = super().__new__(cls)
        payload.size = size
        return payload


class DroppingReader(StreamReader):
    """A stream reader that reads past payloads over the current message's remaining budget."""

    def __init__(self, protocol: ServerProtocol, limit: int) -> None:
        super().__init__()
        self.protocol = protocol
        self.limit = limit
        self.dropped: int | None = None

    def read_exact(self, n: int) -> Generator[None, None, bytearray]:
        # A frame header's reads are at most 8 bytes, so only a payload read can be dropped.
        budget = max(self.limit - (self.protocol.current_size or 0), CONTROL_PAYLOAD_MAX)
        if n <= budget:
            return (yield from super().read_exact(n))
        left = n
        while left:
            if not self.buffer:
                if self.eof:
                    raise EOFError(f"stream ends {left} bytes before the end of a {n}-byte frame")
                yield
                continue
            taken = min(left, len(self.buffer))
            del self.buffer[:taken]
            left -= taken
        self.dropped = n
        return bytearray()


class DroppingServerProtocol(ServerProtocol):
    """websockets' server protocol with a `DroppingReader`; frames it read past carry `Dropped`."""

    def __init__(self, *, limit: int, **kwargs: Any) -> None:
        self._limit = limit
        super().__init__(max_size=None, **kwargs)

    @property
    def reader(self) -> DroppingReader:
        return self._reader

    @reader.setter
    def reader(self, _stock: StreamReader) -> None:
        # The base class makes a plain StreamReader before it starts parsing: ours replaces it.
        self._reader = DroppingReader(self, self._limit)

    def recv_frame(self, frame: Frame) -> None:
        dropped, self._reader.dropped = self._reader.dropped, None
        if dropped is not None:
            frame = dataclasses.replace(frame, data=Dropped(dropped))
        super().recv_frame(frame)


class DroppingWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's sans-I/O protocol over `DroppingServerProtocol` (see the module); with per-message
    deflate on, compressed payloads cannot be read past, so it stays the stock protocol."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limit = self.config.ws_max_size
        self.message_size = 0
        if not self.config.ws_per_message_deflate:
            self.conn = DroppingServerProtocol(limit=self.limit, logger=logging.getLogger("uvicorn.error"))

    def handle_text(self, event: Frame) -> None:
        self.curr_msg_data_type = "text"
        self.frames, self.message_size = [], 0
        self.handle_cont(event)

    def handle_bytes(self, event: Frame) -> None:
        self.curr_msg_data_type = "bytes"
        self.frames, self.message_size = [], 0
        self.handle_cont(event)

    def handle_cont(self, event: Frame) -> None:
        data = event.data
        self.message_size += data.size if isinstance(data, Dropped) else len(data)
        if self.message_size > self.limit:
            self.frames = []
        else:
            self.frames.append(data)  # type: ignore[arg-type]
        if not event.fin:
            return
        if self.message_size <= self.limit:
            self.send_receive_event_to_app()
            return
        if self.close_sent:
            return
        self.queue.put_nowait({"type": "websocket.receive", "text": Oversized(self.message_size)})
        if not self.read_paused:
            self.read_paused = True
            self.transport.pause_reading()
