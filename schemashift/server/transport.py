"""The transports of `serve`. WebSocket: uvicorn's sans-I/O websockets protocol (its default),
except that a message over the size limit is read past, not buffered, and reaches the app as
an `Oversized` marker. HTTP: uvicorn's httptools protocol with a read deadline
(`ReadDeadlineHttpProtocol`).

With the stock protocol a message over `ws_max_size` closes the connection (1009) before the
app sees it, so the client loses its session instead of getting `MESSAGE_TOO_LARGE`. Here the
payload of a frame beyond the message's remaining budget is dropped as it arrives (memory stays
bounded by the limit whatever the client sends), and `WireLimits` answers the marker with the
error frame; the session goes on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
from collections.abc import Generator
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.frames import Frame
from websockets.server import ServerProtocol
from websockets.streams import StreamReader

from schemashift.server.limits import (
    BACKLOG_CLOSE_CODE,
    DEFAULT_READ_TIMEOUT_S,
    MAX_BACKLOG,
    Oversized,
    error_frame,
)

#: control frames carry at most this many bytes, so reads up to it are always kept
CONTROL_PAYLOAD_MAX = 125
#: bytes of a read handed to the frame parser at a time (see `data_received`)
PARSE_SLICE = 4096
#: how long a connection closed for its backlog waits for the client to close its end
BACKLOG_CLOSE_WAIT_S = 1.0


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

    #: messages read but not yet taken by the app, beyond which the connection is closed
    max_backlog: int = MAX_BACKLOG

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limit = self.config.ws_max_size
        self.message_size = 0
        self.backlog_closed = False
        if not self.config.ws_per_message_deflate:
            self.conn = DroppingServerProtocol(limit=self.limit, logger=logging.getLogger("uvicorn.error"))

    def data_received(self, data: bytes) -> None:
        # The parser turns all it is given into frames at once: one read of the socket (up to
        # 256 KiB) can hold thousands of tiny messages, tens of milliseconds of parsing. Fed a
        # slice at a time, a flood is caught by the backlog check within one slice.
        if self.backlog_closed:
            return  # closed for its backlog: what the client still sends is not even parsed
        if len(data) <= PARSE_SLICE:
            super().data_received(data)
            return
        view = memoryview(data)
        for start in range(0, len(data), PARSE_SLICE):
            super().data_received(bytes(view[start : start + PARSE_SLICE]))
            if self.backlog_closed or self.transport.is_closing():
                return

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
        self.check_backlog()

    def send_receive_event_to_app(self) -> None:
        super().send_receive_event_to_app()
        self.check_backlog()

    def check_backlog(self) -> None:
        """Close a connection whose client sent more than `max_backlog` messages the app has not
        taken yet: a client that waits for its replies never has more than one or two. Reading
        pauses after each message, but one read of the socket can hold thousands of small ones;
        they are dropped, the client gets an error frame and the close (BACKLOG_CLOSE_CODE)."""
        if self.queue.qsize() <= self.max_backlog or self.close_sent or not self.handshake_complete:
            return
        while not self.queue.empty():
            self.queue.get_nowait()
        reason = f"inbound backlog over {self.max_backlog} messages"
        message = (
            f"the client sent more than {self.max_backlog} messages without waiting for replies; "
            "the session is closed"
        )
        self.conn.send_text(error_frame(message, "BACKLOG_EXCEEDED").encode())
        self.conn.send_close(BACKLOG_CLOSE_CODE, reason)
        self.transport.write(b"".join(self.conn.data_to_send()))
        self.close_sent = self.backlog_closed = True
        self.queue.put_nowait({"type": "websocket.disconnect", "code": BACKLOG_CLOSE_CODE, "reason": reason})
        # Reading goes on, unparsed, until the client closes or BACKLOG_CLOSE_WAIT_S is up:
        # closing a socket with unread input resets it, and the client could lose the frames.
        if self.read_paused:
            self.read_paused = False
            self.transport.resume_reading()
        self.close_timer = self.loop.call_later(BACKLOG_CLOSE_WAIT_S, self.transport.close)

    async def receive(self) -> Any:
        # A message that is already queued (a client pipelining) would be handed over without
        # the event loop turning, and OpenEnv's loop would answer the whole backlog before any
        # other session's step: yield once first, so sessions take turns message by message.
        if not self.queue.empty():
            await asyncio.sleep(0)
        return await super().receive()


class ReadDeadlineHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools HTTP protocol with a read deadline: a request's headers and body must
    arrive within `read_timeout_s` of its first byte (or of the connection, for its first
    request), or the client gets 408 and the connection is closed. uvicorn bounds only the idle
    time between requests, so a client that sends half a request would hold it open for ever."""

    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._read_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_read_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_read_deadline()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm_read_deadline()

    def on_message_complete(self) -> None:
        self._disarm_read_deadline()
        super().on_message_complete()

    def handle_websocket_upgrade(self) -> None:
        self._disarm_read_deadline()  # the WebSocket session's idle timeout takes over
        super().handle_websocket_upgrade()

    def _arm_read_deadline(self) -> None:
        if self._read_deadline is None:
            self._read_deadline = self.loop.call_later(self.read_timeout_s, self._read_timed_out)

    def _disarm_read_deadline(self) -> None:
        if self._read_deadline is not None:
            self._read_deadline.cancel()
            self._read_deadline = None

    def _read_timed_out(self) -> None:
        self._read_deadline = None
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is None or cycle.response_complete or not cycle.response_started:
            body = json.dumps(
                {"detail": f"the request was not received within {self.read_timeout_s:g} s"}
            ).encode()
            self.transport.write(
                b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body)
            )
        self.transport.close()


def read_deadline_protocol(read_timeout_s: float) -> type[ReadDeadlineHttpProtocol]:
    """The HTTP protocol class for uvicorn's `http` option, with this read deadline."""
    if not (math.isfinite(read_timeout_s) and read_timeout_s > 0):
        raise ValueError(f"read_timeout_s must be a positive, finite number of seconds, got {read_timeout_s}")
    return type("ReadDeadlineHttpProtocol", (ReadDeadlineHttpProtocol,), {"read_timeout_s": read_timeout_s})
