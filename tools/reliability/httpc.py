"""A minimal HTTP/1.1 client on asyncio streams: just what the reliability harness needs.

It speaks raw bytes on purpose: the hostile mode sends what no library would (a header a byte at
a time, invalid UTF-8, half-closed sockets), and the load modes must stay cheap per request.
"""

import asyncio
import json
import socket
import struct
import time

# Longest response head the client accepts (the server's are a few hundred bytes).
MAX_HEAD = 64 * 1024


class HttpError(Exception):
    """The peer broke the protocol or the connection ended mid-message."""


class Connection:
    """One TCP connection: a StreamReader/StreamWriter pair and when it was last used."""

    def __init__(self, reader, writer):
        self.reader = reader
        self.writer = writer
        self.last_used = time.monotonic()
        self.requests = 0

    def close(self):
        try:
            self.writer.close()
        except Exception:
            pass

    def abort(self):
        """Closes with a reset (SO_LINGER 0): the abrupt way a crashed client goes away."""
        sock = self.writer.get_extra_info("socket")
        try:
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.writer.transport.abort()


async def connect(host, port, local_addr=None, rcvbuf=None, timeout=10.0):
    """Opens a connection; `local_addr` binds the source address (e.g. "127.0.0.2"), `rcvbuf`
    sets SO_RCVBUF before connecting (a small one makes a client that never reads fill the
    server's buffers sooner)."""
    if local_addr is None and rcvbuf is None:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, limit=MAX_HEAD), timeout)
        return Connection(reader, writer)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        if rcvbuf is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if local_addr is not None:
            sock.bind((local_addr, 0))
        loop = asyncio.get_running_loop()
        await asyncio.wait_for(loop.sock_connect(sock, (host, port)), timeout)
        reader, writer = await asyncio.open_connection(sock=sock, limit=MAX_HEAD)
    except BaseException:
        sock.close()
        raise
    return Connection(reader, writer)


def request_bytes(method, target, host, body=b"", headers=None, keep_alive=True):
    """The bytes of one request with Content-Length (when there is a body)."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}"]
    if body or method == "POST":
        lines.append("Content-Type: application/json")
        lines.append(f"Content-Length: {len(body)}")
    if not keep_alive:
        lines.append("Connection: close")
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class Head:
    """Status line and headers of a response (header names lower-cased)."""

    def __init__(self, status, headers):
        self.status = status
        self.headers = headers

    def keep_alive(self):
        return self.headers.get("connection", "").lower() != "close"


async def read_head(reader):
    """Reads one response head; skips interim 1xx responses. Raises HttpError on EOF."""
    while True:
        try:
            raw = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as e:
            raise HttpError(f"connection closed before a response ({len(e.partial)} bytes)")
        except asyncio.LimitOverrunError:
            raise HttpError("response head too long")
        lines = raw.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
            raise HttpError(f"bad status line: {lines[0]!r}")
        status = int(parts[1])
        headers = {}
        for line in lines[1:]:
            if not line:
                continue
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if 100 <= status < 200:
            continue
        return Head(status, headers)


async def read_chunks(reader, on_chunk=None):
    """Reads a chunked body; calls `on_chunk(bytes)` per chunk, and stops early (returning
    None) when it returns False. Returns the whole body otherwise."""
    parts = []
    while True:
        try:
            line = await reader.readuntil(b"\r\n")
        except asyncio.IncompleteReadError:
            raise HttpError("connection closed inside a chunked body")
        size = int(line.split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            # Trailers (none expected) up to the empty line.
            while True:
                try:
                    t = await reader.readuntil(b"\r\n")
                except asyncio.IncompleteReadError:
                    raise HttpError("connection closed inside the trailers")
                if t == b"\r\n":
                    return b"".join(parts)
        try:
            data = await reader.readexactly(size + 2)
        except asyncio.IncompleteReadError:
            raise HttpError("connection closed inside a chunk")
        chunk = data[:-2]
        parts.append(chunk)
        if on_chunk is not None and on_chunk(chunk) is False:
            return None


async def read_body(reader, head, on_chunk=None):
    """Reads the body that `head` announces (Content-Length, chunked, or up to EOF)."""
    if head.headers.get("transfer-encoding", "").lower() == "chunked":
        return await read_chunks(reader, on_chunk)
    if "content-length" in head.headers:
        n = int(head.headers["content-length"])
        try:
            return await reader.readexactly(n)
        except asyncio.IncompleteReadError:
            raise HttpError("connection closed inside the body")
    return await reader.read()


def parse_sse(body):
    """Events of a completion stream: (texts joined, finish_reason, error or None, done)."""
    text = []
    finish = None
    error = None
    done = False
    for block in body.decode("utf-8", errors="replace").split("\n\n"):
        for line in block.split("\n"):
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data == "[DONE]":
                done = True
                continue
            event = json.loads(data)
            if "error" in event:
                error = event["error"]
                continue
            for choice in event.get("choices", []):
                text.append(choice.get("text", ""))
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
    return "".join(text), finish, error, done


async def get(host, port, target, timeout=10.0, local_addr=None):
    """One GET on a fresh connection: (status, body, seconds). Raises on failure."""
    start = time.monotonic()
    conn = await connect(host, port, local_addr=local_addr, timeout=timeout)
    try:
        conn.writer.write(request_bytes("GET", target, host, keep_alive=False))
        head = await asyncio.wait_for(read_head(conn.reader), timeout)
        body = await asyncio.wait_for(read_body(conn.reader, head), timeout)
        return head.status, body, time.monotonic() - start
    finally:
        conn.close()
