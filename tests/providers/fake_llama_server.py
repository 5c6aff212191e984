"""Stands in for llama.cpp's `llama-server` in the local provider tests.

Takes the same --model/--host/--port arguments (and ignores the rest), answers GET /v1/models
and GET /metrics, and streams a fixed reply in the OpenAI format; FAKE_LLAMA_STARTS (a file)
gets one line per start. FAKE_LLAMA_MODE changes its behaviour: "crash-on-chat" exits as
soon as a chat request arrives, "never-ready" listens but never answers /v1/models.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE = os.environ.get("FAKE_LLAMA_MODE", "")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: object) -> None:
        sys.stderr.write("fake llama: " + format % args + "\n")

    def do_GET(self) -> None:
        if self.path == "/metrics":
            body = b"llamacpp:requests_processing 0\n"
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if MODE == "never-ready":
            self.send_response(503)
            self.end_headers()
            return
        body = json.dumps({"object": "list", "data": [{"id": self.server.model}]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        request = json.loads(self.rfile.read(length))
        if MODE == "crash-on-chat":
            sys.stderr.write("fake llama: GGML_ASSERT failed, aborting\n")
            sys.stderr.flush()
            os._exit(134)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        words = ["local ", "reply to ", request["messages"][-1]["content"]]
        for word in words:
            chunk = {"choices": [{"index": 0, "delta": {"content": word}, "finish_reason": None}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        self.wfile.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-m")
    parser.add_argument("--model", required=True)
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    args, _ = parser.parse_known_args()
    if os.environ.get("FAKE_LLAMA_STARTS"):
        with open(os.environ["FAKE_LLAMA_STARTS"], "a") as f:
            f.write(f"{os.getpid()}\n")
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.model = args.model  # type: ignore[attr-defined]
    print(f"fake llama listening on {args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
