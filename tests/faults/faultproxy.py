#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A fault-injecting HTTP/1.1 proxy between kctrld and kube-apisim.

It does what kube-apisim's own fault controls (tests/apisim/control.c: Status
answers, connection reset before the answer, stall, watch reset after N
events, fixed-size chunking) cannot:

  stall     forward the response head and the first `after` watch events (or
            `after` body bytes of a non-watch answer; a negative `after`
            sends no response head at all), then nothing, without closing,
            until the client gives up (its idle timer) or release_stalls();
  truncate  after `after` events, send a chunk header announcing the next
            event and only half of its bytes, then close the connection;
  garbage   after `after` events, inject one chunk of garbage bytes (not
            JSON, NUL and invalid UTF-8 included) into the stream, then go
            on forwarding;
  tiny      re-chunk the whole body into chunks of 1..`chunk` bytes (split
            mid-event, mid-UTF-8);
  drop      close the connection after `after` events (0: as soon as the
            response head arrived from upstream, before sending anything).

Rules match by method, path prefix, a substring of the query and
watch/non-watch; each fires on the
next `count` matching requests (-1: every one). drop_all() cuts every open
connection (a network blip or a server restart); set_upstream() re-points the
proxy at another server, which, with drop_all(), is what a restarted API
server at the same address looks like to the client.

Used as a library by tests/faults/run_faults.py (FaultProxy runs in threads
of the caller) or standalone:
    faultproxy.py --upstream http://127.0.0.1:PORT [--listen 127.0.0.1:0]
which prints its URL and reads JSON rules from stdin, one per line
({"action":"stall","watch":true,"count":1}, {"drop_all":true}, {"clear":true}).

Only plain HTTP/1.1 (kctrld speaks HTTP/1.1 to http:// servers). A request's
`Expect: 100-continue` is answered by the proxy itself and not forwarded.
"""
import json
import random
import select
import socket
import sys
import threading
import time
import urllib.parse

GARBAGE = b'{"type":"MODIFIED","object":{"kind":\x00\xff\xfe garbage \xc3\x28 ]]}}\n'


class Rule:
    def __init__(self, action, count=1, after=0, watch=None, method=None, path_prefix="",
                 chunk=7, garbage=GARBAGE, query=""):
        if action not in ("stall", "truncate", "garbage", "tiny", "drop"):
            raise ValueError("unknown action %r" % action)
        self.action, self.count, self.after = action, count, after
        self.watch, self.method, self.path_prefix = watch, method, path_prefix
        self.chunk, self.garbage, self.query = max(1, chunk), garbage, query
        self.fired = 0

    def matches(self, method, path, is_watch, query=""):
        if self.count == 0:
            return False
        if self.watch is not None and self.watch != is_watch:
            return False
        if self.method and self.method != method:
            return False
        return path.startswith(self.path_prefix) and self.query in query


class _Closed(Exception):
    """The client or the upstream connection ended; close this connection."""


def _is_watch(target):
    q = urllib.parse.parse_qs(urllib.parse.urlsplit(target).query)
    return q.get("watch", [""])[0] in ("1", "true")


def _parse_head(head):
    lines = head.decode("latin-1").split("\r\n")
    first = lines[0]
    hdrs = []
    for ln in lines[1:]:
        if ln:
            k, _, v = ln.partition(":")
            hdrs.append((k.strip(), v.strip()))
    return first, hdrs


def _hget(hdrs, name):
    name = name.lower()
    for k, v in hdrs:
        if k.lower() == name:
            return v
    return None


class _Conn:
    """One client connection and its upstream connection (a thread)."""

    def __init__(self, proxy, cl):
        self.proxy, self.cl, self.up = proxy, cl, None
        self.cbuf = b""
        self.ubuf = b""
        self.closed = False

    # -- socket helpers --
    def close(self):
        self.closed = True
        for s in (self.cl, self.up):
            if s is not None:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                try:
                    s.close()
                except OSError:
                    pass
        self.up = None

    def _recv_client(self):
        try:
            d = self.cl.recv(65536)
        except OSError:
            d = b""
        if not d:
            raise _Closed()
        return d

    def _send_client(self, data):
        try:
            self.cl.sendall(data)
        except OSError:
            raise _Closed()

    def _read_until(self, sock, attr, marker):
        buf = getattr(self, attr)
        while marker not in buf:
            try:
                d = sock.recv(65536)
            except OSError:
                d = b""
            if not d:
                setattr(self, attr, buf)
                raise _Closed()
            buf += d
        i = buf.index(marker) + len(marker)
        setattr(self, attr, buf[i:])
        return buf[:i]

    def _read_exact(self, sock, attr, n):
        buf = getattr(self, attr)
        while len(buf) < n:
            try:
                d = sock.recv(max(65536, n - len(buf)))
            except OSError:
                d = b""
            if not d:
                raise _Closed()
            buf += d
        setattr(self, attr, buf[n:])
        return buf[:n]

    def _connect_up(self):
        host, port = self.proxy.upstream
        self.up = socket.create_connection((host, port), timeout=None)
        self.up.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.ubuf = b""

    # -- request side --
    def _read_request(self):
        head = self._read_until(self.cl, "cbuf", b"\r\n\r\n")
        first, hdrs = _parse_head(head)
        method, target = first.split(" ")[0], first.split(" ")[1]
        body = b""
        expect = _hget(hdrs, "expect")
        if expect and expect.lower() == "100-continue":
            self._send_client(b"HTTP/1.1 100 Continue\r\n\r\n")
            hdrs = [(k, v) for k, v in hdrs if k.lower() != "expect"]
        te = _hget(hdrs, "transfer-encoding")
        if te and "chunked" in te.lower():
            parts = []
            while True:
                size = int(self._read_until(self.cl, "cbuf", b"\r\n").split(b";")[0], 16)
                if size == 0:
                    self._read_until(self.cl, "cbuf", b"\r\n")
                    break
                parts.append(self._read_exact(self.cl, "cbuf", size))
                self._read_exact(self.cl, "cbuf", 2)
            body = b"".join(parts)
            hdrs = [(k, v) for k, v in hdrs if k.lower() != "transfer-encoding"]
            hdrs.append(("Content-Length", str(len(body))))
        else:
            n = int(_hget(hdrs, "content-length") or 0)
            if n:
                body = self._read_exact(self.cl, "cbuf", n)
        raw = first + "\r\n" + "".join("%s: %s\r\n" % kv for kv in hdrs) + "\r\n"
        return method, target, raw.encode("latin-1") + body

    # -- response side --
    def _hold(self):
        """Stalled: forward nothing, keep the client connection open until it
        closes or the proxy releases stalls."""
        if self.up is not None:
            try:
                self.up.close()
            except OSError:
                pass
            self.up = None
        self.proxy.stats["stalls"] += 1
        gen = self.proxy.release_gen
        while not self.proxy.stopping and self.proxy.release_gen == gen:
            r, _, _ = select.select([self.cl], [], [], 0.2)
            if r:
                try:
                    d = self.cl.recv(65536)
                except OSError:
                    d = b""
                if not d:
                    break
        raise _Closed()

    def _emit_chunk(self, data, rule):
        if not data:
            return
        if rule is not None and rule.action == "tiny":
            i = 0
            while i < len(data):
                n = random.randint(1, rule.chunk)
                piece = data[i:i + n]
                self._send_client(b"%x\r\n" % len(piece) + piece + b"\r\n")
                i += n
            return
        self._send_client(b"%x\r\n" % len(data) + data + b"\r\n")

    def _unit(self, unit, rule, state):
        """Forwards one unit (a watch event, or a decoded body piece of a
        non-watch answer), applying rule once `after` units passed."""
        if rule is not None and not state["done"] and rule.action != "tiny" and state["units"] >= rule.after:
            state["done"] = True
            self.proxy.stats[rule.action] += 1
            if rule.action == "stall":
                self._hold()
            if rule.action == "drop":
                raise _Closed()
            if rule.action == "truncate":
                half = unit[:max(1, len(unit) // 2)]
                self._send_client(b"%x\r\n" % len(unit) + half)
                raise _Closed()
            if rule.action == "garbage":
                self._send_client(b"%x\r\n" % len(rule.garbage) + rule.garbage + b"\r\n")
        state["units"] += 1
        self._emit_chunk(unit, rule)

    def _relay_chunked(self, is_watch, rule, state):
        pending = b""
        while True:
            line = self._read_up_until(b"\r\n")
            size = int(line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                self._read_up_until(b"\r\n")  # no trailers from apisim
                if pending:
                    self._unit(pending, rule, state)
                self._send_client(b"0\r\n\r\n")
                return
            data = self._read_up_exact(size)
            self._read_up_exact(2)
            if not is_watch:
                self._unit(data, rule, state)
                continue
            pending += data
            while b"\n" in pending:
                i = pending.index(b"\n") + 1
                ev, pending = pending[:i], pending[i:]
                self._unit(ev, rule, state)

    def _wait_up(self):
        """Blocks until upstream has bytes; raises _Closed when the client
        went away meanwhile (so a quiet watch does not outlive its client)."""
        while True:
            r, _, _ = select.select([self.up, self.cl], [], [], 1.0)
            if self.cl in r:
                try:
                    d = self.cl.recv(65536, socket.MSG_PEEK)
                except OSError:
                    d = b""
                if not d:
                    raise _Closed()
                if self.up not in r:
                    time.sleep(0.05)  # a pipelined request: leave it for later
            if self.up in r:
                return

    def _read_up_until(self, marker):
        while marker not in self.ubuf:
            self._wait_up()
            try:
                d = self.up.recv(65536)
            except OSError:
                d = b""
            if not d:
                raise _Closed()
            self.ubuf += d
        i = self.ubuf.index(marker) + len(marker)
        out, self.ubuf = self.ubuf[:i], self.ubuf[i:]
        return out

    def _read_up_exact(self, n):
        while len(self.ubuf) < n:
            self._wait_up()
            try:
                d = self.up.recv(max(65536, n - len(self.ubuf)))
            except OSError:
                d = b""
            if not d:
                raise _Closed()
            self.ubuf += d
        out, self.ubuf = self.ubuf[:n], self.ubuf[n:]
        return out

    def _relay_length(self, n, rule, state):
        if rule is not None and rule.action in ("stall", "drop", "truncate"):
            keep = max(0, min(n, rule.after))
            if keep:
                self._send_client(self._read_up_exact(keep))
            self.proxy.stats[rule.action] += 1
            if rule.action == "stall":
                self._hold()
            raise _Closed()
        while n > 0:
            if not self.ubuf:
                self._wait_up()
                try:
                    d = self.up.recv(min(n, 65536))
                except OSError:
                    d = b""
                if not d:
                    raise _Closed()
                self.ubuf = d
            take, self.ubuf = self.ubuf[:n], self.ubuf[n:]
            self._send_client(take)
            n -= len(take)

    def serve(self):
        try:
            while not self.proxy.stopping:
                method, target, raw = self._read_request()
                is_watch = _is_watch(target)
                rule = self.proxy._take_rule(method, target, is_watch)
                self.proxy.stats["requests"] += 1
                if rule is not None and rule.action == "stall" and rule.after < 0:
                    self._hold()
                for attempt in (0, 1):
                    try:
                        if self.up is None:
                            self._connect_up()
                        self.up.sendall(raw)
                        head = self._read_up_until(b"\r\n\r\n")
                        break
                    except (_Closed, OSError):
                        if self.up is not None:
                            self.up.close()
                        self.up = None
                        if attempt:
                            raise _Closed()
                first, hdrs = _parse_head(head)
                code = int(first.split(" ")[1])
                if rule is not None and rule.action == "drop" and rule.after <= 0:
                    self.proxy.stats["drop"] += 1
                    raise _Closed()
                te = _hget(hdrs, "transfer-encoding")
                chunked = bool(te and "chunked" in te.lower())
                cl_len = _hget(hdrs, "content-length")
                close_after = (_hget(hdrs, "connection") or "").lower() == "close"
                state = {"units": 0, "done": False}
                if chunked:
                    self._send_client(head)
                    self._relay_chunked(is_watch, rule, state)
                elif cl_len is not None:
                    self._send_client(head)
                    self._relay_length(int(cl_len), rule, state)
                elif method == "HEAD" or code in (204, 304) or 100 <= code < 200:
                    self._send_client(head)
                else:  # body until close
                    self._send_client(head)
                    while True:
                        self._wait_up()
                        d = self.up.recv(65536)
                        if not d:
                            raise _Closed()
                        self._send_client(d)
                if close_after:
                    raise _Closed()
        except (_Closed, OSError, ValueError, IndexError):
            pass
        finally:
            self.close()
            self.proxy._forget(self)


class FaultProxy:
    """The proxy: FaultProxy(("127.0.0.1", port)).start(); .url is where
    clients connect. Thread-safe controls: add(Rule), clear(), drop_all(),
    release_stalls(), set_upstream(host, port), stop()."""

    def __init__(self, upstream, listen=("127.0.0.1", 0)):
        self.upstream = upstream
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(listen)
        self.lsock.listen(128)
        self.port = self.lsock.getsockname()[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.mu = threading.Lock()
        self.rules = []
        self.conns = set()
        self.stopping = False
        self.release_gen = 0
        self.stats = {"requests": 0, "connections": 0, "stalls": 0, "stall": 0, "truncate": 0,
                      "garbage": 0, "tiny": 0, "drop": 0, "dropped_all": 0}
        self.thread = None

    def start(self):
        self.thread = threading.Thread(target=self._accept, daemon=True, name="faultproxy-accept")
        self.thread.start()
        return self

    def _accept(self):
        while not self.stopping:
            try:
                cl, _ = self.lsock.accept()
            except OSError:
                return
            cl.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            c = _Conn(self, cl)
            with self.mu:
                self.conns.add(c)
                self.stats["connections"] += 1
            threading.Thread(target=c.serve, daemon=True, name="faultproxy-conn").start()

    def _forget(self, c):
        with self.mu:
            self.conns.discard(c)

    def _take_rule(self, method, target, is_watch):
        u = urllib.parse.urlsplit(target)
        with self.mu:
            for r in self.rules:
                if r.matches(method, u.path, is_watch, u.query):
                    if r.count > 0:
                        r.count -= 1
                    r.fired += 1
                    if r.action == "tiny":
                        self.stats["tiny"] += 1
                    return r
        return None

    def add(self, rule):
        with self.mu:
            self.rules.append(rule)
        return rule

    def clear(self):
        with self.mu:
            self.rules = []

    def release_stalls(self):
        self.release_gen += 1

    def drop_all(self):
        with self.mu:
            conns = list(self.conns)
            self.stats["dropped_all"] += 1
        for c in conns:
            c.close()
        return len(conns)

    def set_upstream(self, host, port):
        self.upstream = (host, port)

    def open_connections(self):
        with self.mu:
            return len(self.conns)

    def stop(self):
        self.stopping = True
        try:
            self.lsock.close()
        except OSError:
            pass
        self.drop_all()


def main(argv):
    import argparse
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--upstream", required=True)
    p.add_argument("--listen", default="127.0.0.1:0")
    a = p.parse_args(argv)
    u = urllib.parse.urlsplit(a.upstream)
    host, _, port = a.listen.rpartition(":")
    px = FaultProxy((u.hostname, u.port), (host, int(port))).start()
    print(px.url, flush=True)
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            d = json.loads(line)
            if d.pop("drop_all", False):
                print(json.dumps({"dropped": px.drop_all()}), flush=True)
            elif d.pop("clear", False):
                px.clear()
                px.release_stalls()
                print('{"cleared":true}', flush=True)
            else:
                px.add(Rule(d.pop("action"), **{{"pathPrefix": "path_prefix"}.get(k, k): v
                                               for k, v in d.items()}))
                print('{"added":true}', flush=True)
        except (ValueError, TypeError, KeyError) as e:
            print(json.dumps({"error": str(e)}), flush=True)
    px.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
