#!/usr/bin/env python3
"""A recording reverse proxy for the Tinker SDK's traffic (testdata/sdk).

    record.py LISTEN_PORT UPSTREAM_URL OUT.jsonl

forwards every request to UPSTREAM_URL and appends one JSON line per
exchange to OUT.jsonl, in the order the answers come back: n, method,
path, the request's Content-Type (and Accept when it asks for protobuf),
the request body (JSON as is, anything else base64 in request_base64),
the status, the answer's Content-Type and body (likewise). No other
header is kept (no key is recorded); telemetry bodies are dropped.
Standard library only.
"""
import base64
import http.client
import http.server
import json
import sys
import threading
import urllib.parse

PORT, UPSTREAM, OUT = int(sys.argv[1]), urllib.parse.urlsplit(sys.argv[2]), sys.argv[3]
lock = threading.Lock()
count = 0
HOP = {"host", "content-length", "connection", "keep-alive", "transfer-encoding", "accept-encoding"}


def body_fields(prefix, ctype, data, out):
    if not data:
        return
    if "json" in (ctype or ""):
        try:
            out[prefix] = json.loads(data)
            return
        except ValueError:
            pass
    out[prefix + "_base64"] = base64.b64encode(data).decode()


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def forward(self):
        global count
        n = int(self.headers.get("Content-Length") or 0)
        req = self.rfile.read(n) if n else b""
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        conn = http.client.HTTPConnection(UPSTREAM.hostname, UPSTREAM.port, timeout=120)
        conn.request(self.command, self.path, body=req or None, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        rtype = resp.getheader("Content-Type")
        conn.close()
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in HOP:
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        path = urllib.parse.urlsplit(self.path).path
        with lock:
            count += 1
            rec = {"n": count, "method": self.command, "path": path}
            if req:
                rec["request_content_type"] = self.headers.get("Content-Type")
            accept = self.headers.get("Accept") or ""
            if "protobuf" in accept:
                rec["request_accept"] = accept
            if not path.endswith("/telemetry"):
                body_fields("request", self.headers.get("Content-Type"), req, rec)
            rec["status"] = resp.status
            rec["response_content_type"] = rtype
            body_fields("response", rtype, data, rec)
            with open(OUT, "a") as f:
                f.write(json.dumps(rec, separators=(",", ":")) + "\n")

    do_GET = do_POST = do_PUT = do_DELETE = forward


http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Proxy).serve_forever()
