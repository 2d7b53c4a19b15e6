#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""cmhash-webhook: the cmhash controller (plugins/hooks/cmhash/cmhash.py, its
reconcile function reused as is) served as a kctrld webhook hook (protocol
kctrld.io/hook/v1, docs/hooks.md) by a tiny http.server: kctrld POSTs one
request document per reconcile, the answer is the response document.

  server.py [--listen 127.0.0.1:8443] [--tls-cert F --tls-key F] [--client-ca F]
            [--port-file F]

--tls-cert/--tls-key serve HTTPS; --client-ca also requires a client
certificate signed by that CA (kctrld's hook.webhook.clientCertFile).
--port-file writes the bound port there (for --listen HOST:0).

Environment: as cmhash.py (CMHASH_LABEL), plus CMHASH_FAULTS=1: a ConfigMap
with data["kctrld-test"] set to "http500" is answered with a 500, "garbage"
with a body that is not JSON, "error" with an error result (cmhash.py).
One line per request on stderr: "reconcile key=K attempt=N".
"""
import argparse
import json
import os
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cmhash"))
import cmhash  # noqa: E402

FAULTS = os.environ.get("CMHASH_FAULTS") == "1"
MAX_REQUEST = 64 << 20


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: kctrld reuses its connection
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall

    def reply(self, code, body, ctype="application/json"):
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        if self.headers.get("Content-Type", "").split(";")[0] != "application/json" or n > MAX_REQUEST:
            return self.reply(415, "expected an application/json request\n", "text/plain")
        try:
            req = json.loads(self.rfile.read(n))
            if req.get("apiVersion") != "kctrld.io/hook/v1":
                raise ValueError("apiVersion %r" % req.get("apiVersion"))
        except ValueError as e:
            return self.reply(400, "bad request: %s\n" % e, "text/plain")
        sys.stderr.write("reconcile key=%s attempt=%d\n" % (req["key"], req["attempt"]))
        sys.stderr.flush()
        obj = req.get("object") or {}
        fault = (obj.get("data") or {}).get("kctrld-test") if FAULTS else None
        if fault == "http500":
            return self.reply(500, "refusing %s on purpose\n" % req["key"], "text/plain")
        if fault == "garbage":
            return self.reply(200, "this is not JSON")
        self.reply(200, json.dumps(cmhash.reconcile(req), separators=(",", ":")))

    def log_message(self, fmt, *args):  # the access log is noise; requests are logged above
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", default="127.0.0.1:8443")
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    ap.add_argument("--client-ca")
    ap.add_argument("--port-file")
    a = ap.parse_args()
    host, _, port = a.listen.rpartition(":")
    srv = ThreadingHTTPServer((host, int(port)), Handler)
    if a.tls_cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.tls_cert, a.tls_key)
        if a.client_ca:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(a.client_ca)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    if a.port_file:
        with open(a.port_file + ".tmp", "w") as f:
            f.write("%d\n" % srv.server_address[1])
        os.rename(a.port_file + ".tmp", a.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
