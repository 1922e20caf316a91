#!/usr/bin/python3
"""The hostile clients of `run.py hostile`, in their own process so that their work does not
delay the good client's measurements. Run by hostile.py with one JSON argument (the plan);
prints JSON lines: {"event": "attack_started"}, {"event": "attack_ended"},
{"event": "all_closed"}, then {"event": "result", ...}.

Each hostile kind runs in slots. During the attack window a slot opens a connection, misbehaves
and, once the server has closed it, opens the next (a sustained attack). After the window the
slot's last connection keeps misbehaving until the server closes it or `close_wait_s` passes;
a connection still open then is reported as "still_open" (a leak).
"""

import asyncio
import json
import socket
import struct
import sys
import time

import httpc

T0 = time.monotonic()


def now():
    return round(time.monotonic() - T0, 3)


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class Record:
    """One hostile connection: when it opened and ended, and how."""

    def __init__(self, kind, slot):
        self.kind, self.slot = kind, slot
        self.t_open = now()
        self.t_end = None
        # "refused" (an error response and close), "answered" (a normal response), "closed"
        # (EOF with no response), "reset", "cut" (a stream ended without [DONE]),
        # "complete" (a stream with [DONE]), "still_open", "connect_failed"
        self.how = None
        self.status = None
        self.detail = None
        self.bytes_sent = 0

    def end(self, how, status=None, detail=None):
        if self.how is None:
            self.how, self.status, self.detail, self.t_end = how, status, detail, now()

    def as_dict(self):
        return {"kind": self.kind, "slot": self.slot, "t_open": self.t_open, "t_end": self.t_end,
                "how": self.how, "status": self.status, "detail": self.detail,
                "bytes_sent": self.bytes_sent}


def status_of(data):
    """The status code at the start of a response, or None."""
    if data.startswith(b"HTTP/1."):
        try:
            return int(data.split(b" ", 2)[1])
        except (IndexError, ValueError):
            return None
    return None


def tcp_state(conn):
    """tcpi_state of the socket: 1 established, 7 closed, 8 close-wait (peer sent FIN)."""
    sock = conn.writer.get_extra_info("socket")
    try:
        return struct.unpack("B", sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1))[0]
    except (OSError, AttributeError, struct.error):
        return None


class Attack:
    def __init__(self, plan):
        self.p = plan
        self.host, self.port = plan["host"], plan["port"]
        self.addrs = plan["addrs"]
        self.records = []
        self.window_over = asyncio.Event()
        self.give_up = asyncio.Event()
        self.next_addr = 0

    def addr(self):
        self.next_addr = (self.next_addr + 1) % len(self.addrs)
        return self.addrs[self.next_addr]

    async def connect(self, rec, rcvbuf=None):
        try:
            return await httpc.connect(self.host, self.port, local_addr=self.addr(),
                                       rcvbuf=rcvbuf, timeout=10.0)
        except (OSError, asyncio.TimeoutError) as e:
            rec.end("connect_failed", detail=f"{type(e).__name__}: {e}")
            return None

    async def read_or_give_up(self, reader, n=65536):
        """Reads once; returns bytes, or None when the close wait ran out first."""
        read = asyncio.ensure_future(reader.read(n))
        give = asyncio.ensure_future(self.give_up.wait())
        done, _ = await asyncio.wait({read, give}, return_when=asyncio.FIRST_COMPLETED)
        give.cancel()
        if read in done:
            return read.result()
        read.cancel()
        return None

    async def finish_read(self, rec, conn, first=b""):
        """Reads until EOF after `first`; ends `rec` by what arrived."""
        data = first
        try:
            while True:
                chunk = await self.read_or_give_up(conn.reader)
                if chunk is None:
                    rec.end("still_open", status_of(data), f"{len(data)} bytes read")
                    return data
                if not chunk:
                    break
                data += chunk
        except (ConnectionResetError, BrokenPipeError) as e:
            rec.end("reset" if not data else ("refused" if (status_of(data) or 0) >= 400
                                              else "answered"), status_of(data), str(e))
            return data
        st = status_of(data)
        if st is None:
            rec.end("closed", None, f"{len(data)} bytes" if data else "no response")
        else:
            rec.end("refused" if st >= 400 else "answered", st)
        return data

    # -- kinds ---------------------------------------------------------------------------------

    async def idle(self, rec):
        conn = await self.connect(rec)
        if conn is None:
            return
        try:
            await self.finish_read(rec, conn)
        finally:
            conn.close()

    async def trickle(self, rec):
        """A request line, then an endless header value, one byte per interval."""
        conn = await self.connect(rec)
        if conn is None:
            return
        interval = self.p["trickle_interval_s"]
        try:
            conn.writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Trickle: ")
            rec.bytes_sent = 52
            read = asyncio.ensure_future(conn.reader.read(65536))
            while True:
                done, _ = await asyncio.wait({read}, timeout=interval)
                if read in done:
                    try:
                        await self.finish_read(rec, conn, read.result())
                    except (ConnectionResetError, BrokenPipeError) as e:
                        rec.end("reset", None, str(e))
                    return
                if self.give_up.is_set():
                    read.cancel()
                    rec.end("still_open", None, f"{rec.bytes_sent} bytes sent")
                    return
                try:
                    conn.writer.write(b"a")
                    rec.bytes_sent += 1
                except (ConnectionResetError, BrokenPipeError, RuntimeError):
                    pass  # the read side tells how it ended
        except (ConnectionResetError, BrokenPipeError) as e:
            rec.end("reset", None, str(e))
        finally:
            conn.close()

    async def never_read(self, rec):
        """A streaming request far longer than the server's stream buffer; reads nothing until
        the attack window is over (then drains, to learn whether the stream was cut)."""
        conn = await self.connect(rec, rcvbuf=4096)
        if conn is None:
            return
        body = json.dumps({"prompt": ["Once upon a time"] * self.p["never_read_prompts"],
                           "max_tokens": self.p["never_read_tokens"], "temperature": 0,
                           "stream": True}).encode()
        try:
            conn.writer.write(httpc.request_bytes("POST", "/v1/completions", "x", body))
            rec.bytes_sent = len(body)
            seen_closed = None
            while not self.window_over.is_set():
                st = tcp_state(conn)
                if st is not None and st != 1 and seen_closed is None:
                    seen_closed = now()
                try:
                    await asyncio.wait_for(self.window_over.wait(), 0.5)
                except asyncio.TimeoutError:
                    pass
            data = await self.finish_read(rec, conn)
            done = b"data: [DONE]" in data
            rec.detail = (f"{len(data)} bytes read after the window; "
                          f"{'[DONE] seen' if done else 'no [DONE]'}"
                          + (f"; socket closed by the peer at {seen_closed} s" if seen_closed
                             else ""))
            if rec.how in ("closed", "answered", "reset"):
                rec.how = "complete" if done else "cut"
        except (ConnectionResetError, BrokenPipeError) as e:
            rec.end("reset", None, str(e))
        finally:
            conn.close()

    async def half_close(self, rec):
        """A complete small request, then shutdown(SHUT_WR): does it get its answer?"""
        conn = await self.connect(rec)
        if conn is None:
            return
        body = json.dumps({"prompt": "Once upon a time", "max_tokens": 16,
                           "temperature": 0}).encode()
        try:
            conn.writer.write(httpc.request_bytes("POST", "/v1/completions", "x", body))
            conn.writer.write_eof()
            await self.finish_read(rec, conn)
        except (ConnectionResetError, BrokenPipeError) as e:
            rec.end("reset", None, str(e))
        finally:
            conn.close()

    async def slot(self, kind, index, fn, pause=0.0, reopen_refused=True):
        """Runs `fn` on fresh connections while the window lasts; a slot whose connection was
        refused (an error response) stops unless `reopen_refused`."""
        while True:
            rec = Record(kind, index)
            self.records.append(rec)
            await fn(rec)
            if self.window_over.is_set() or rec.how == "still_open":
                return
            if rec.how == "refused" and not reopen_refused:
                return
            await asyncio.sleep(pause if rec.how != "connect_failed" else 0.5)
            if self.window_over.is_set():
                return

    # -- probes --------------------------------------------------------------------------------

    def probes(self):
        mh, mb = self.p["max_header_bytes"], self.p["max_body_bytes"]
        big_header = (b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (mh + 4096) +
                      b"\r\n\r\n")
        big_length = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                      b"application/json\r\nContent-Length: " + str(mb + 1).encode() +
                      b"\r\n\r\n")
        chunk = b"a" * 65536
        n_chunks = mb // len(chunk) + 2
        big_chunked = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                       b"application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
                       (b"%x\r\n" % len(chunk) + chunk + b"\r\n") * n_chunks + b"0\r\n\r\n")

        def post(body):
            return httpc.request_bytes("POST", "/v1/completions", "x", body)
        utf8 = [
            ("invalid_utf8_ff", b'{"prompt":"\xff\xfe once","max_tokens":4}'),
            ("invalid_utf8_overlong", b'{"prompt":"a\xc0\xafb","max_tokens":4}'),
            ("invalid_utf8_truncated", b'{"prompt":"abc\xe2\x82","max_tokens":4}'),
            ("invalid_utf8_surrogate", b'{"prompt":"a\xed\xa0\x80b","max_tokens":4}'),
        ]
        out = [("header_too_large", big_header, 431), ("body_too_large_length", big_length, 413),
               ("body_too_large_chunked", big_chunked, 413)]
        out += [(name, post(body), 400) for name, body in utf8]
        # Informational: JSON-escaped lone surrogate (valid JSON text, not valid Unicode).
        out.append(("escaped_lone_surrogate", post(b'{"prompt":"a\\ud800b","max_tokens":4}'),
                    None))
        return out

    async def probe(self, name, payload, expect):
        start = time.monotonic()
        result = {"name": name, "expect": expect, "status": None, "error": None}
        rec = Record("probe", name)
        try:
            conn = await httpc.connect(self.host, self.port, local_addr=self.addr(), timeout=10)
        except (OSError, asyncio.TimeoutError) as e:
            result["error"] = f"connect: {e}"
            return result
        try:
            try:
                conn.writer.write(payload)
                await asyncio.wait_for(conn.writer.drain(), 10)
            except (ConnectionResetError, BrokenPipeError, asyncio.TimeoutError) as e:
                result["write_error"] = type(e).__name__
            head = await asyncio.wait_for(httpc.read_head(conn.reader), 10)
            result["status"] = head.status
            body = await asyncio.wait_for(httpc.read_body(conn.reader, head), 10)
            try:
                result["code"] = json.loads(body)["error"]["code"]
            except (ValueError, KeyError, TypeError):
                pass
            # The connection must end (or be reusable): wait for the server's close briefly.
            if not head.keep_alive():
                tail = await asyncio.wait_for(conn.reader.read(), 10)
                result["closed_after"] = tail == b""
        except (OSError, httpc.HttpError, asyncio.TimeoutError, ValueError) as e:
            result["error"] = f"{type(e).__name__}: {e}"
        finally:
            conn.close()
        del rec
        result["ms"] = round((time.monotonic() - start) * 1000, 1)
        result["ok"] = expect is None or result["status"] == expect
        return result

    async def probe_rounds(self):
        results = []
        rounds = self.p["probe_rounds"]
        for r in range(rounds):
            for name, payload, expect in self.probes():
                res = await self.probe(name, payload, expect)
                res["round"] = r
                results.append(res)
            if r + 1 < rounds:
                try:
                    await asyncio.wait_for(self.window_over.wait(), self.p["seconds"] / rounds)
                except asyncio.TimeoutError:
                    pass
        return results

    # -- the run -------------------------------------------------------------------------------

    async def run(self):
        p = self.p
        sem = asyncio.Semaphore(100)  # connects at once while ramping up the idle ones

        async def idle_ramped(rec):
            async with sem:
                conn_task = asyncio.ensure_future(self.connect(rec))
                conn = await conn_task
            if conn is None:
                return
            try:
                await self.finish_read(rec, conn)
            finally:
                conn.close()

        emit({"event": "attack_started", "t": now()})
        slots = []
        for i in range(p["idle"]):
            slots.append(asyncio.ensure_future(self.slot("idle", i, idle_ramped, 0.1, False)))
        for i in range(p["trickle"]):
            slots.append(asyncio.ensure_future(self.slot("trickle", i, self.trickle, 0.1)))
        for i in range(p["never_read"]):
            slots.append(asyncio.ensure_future(self.slot("never_read", i, self.never_read, 0.1)))
        for i in range(p["half_close"]):
            slots.append(asyncio.ensure_future(self.slot("half_close", i, self.half_close, 1.0)))
        probes = asyncio.ensure_future(self.probe_rounds())
        await asyncio.sleep(p["seconds"])
        self.window_over.set()
        emit({"event": "attack_ended", "t": now()})
        t_end = time.monotonic()
        done, pending = await asyncio.wait(slots, timeout=p["close_wait_s"]) if slots else ((), ())
        if pending:
            self.give_up.set()
            await asyncio.wait(pending, timeout=10)
        else:
            emit({"event": "all_closed", "t": now(),
                  "after_window_s": round(time.monotonic() - t_end, 3)})
        probe_results = await probes
        emit({"event": "result", "records": [r.as_dict() for r in self.records],
              "probes": probe_results, "gave_up": bool(pending)})


def main():
    plan = json.loads(sys.argv[1])
    asyncio.run(Attack(plan).run())


if __name__ == "__main__":
    main()
