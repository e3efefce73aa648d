#!/usr/bin/env python3
"""A fake OpenAI-compatible chat-completions server for kope's end-to-end tests.

It listens on 127.0.0.1 (port 0 = any free port, written to --port-file once listening) and
answers POST /v1/chat/completions from fixture files, so runs are deterministic and free:

  kernel calls   the user message says "operator `NAME` — attempt K of N"; the answer is
                 FIXTURES/NAME/K.md, else FIXTURES/NAME/default.md, else a refusal without code
                 (when the system message is the OpenCL one, FIXTURES/NAME/opencl/ first; the CUDA
                 one, FIXTURES/NAME/cuda/ first).
  reflections    (the system message asks for lessons) FIXTURES/NAME/reflect.json, else
                 FIXTURES/reflect.json, else {"lessons": []}.
  --echo-reference  a kernel call without a fixture is answered with the reference source the
                 prompt shows (a correct, unoptimised kernel: for building test memories, e.g.
                 the dev starter experience of tests/starter/).

Usage it reports: completion = ceil(len(answer)/4); prompt = ceil(len(all messages)/4), or with
--usage fixed (or a model name containing "fixed-usage") a number that depends only on
(op, attempt, purpose), so resumed and straight runs report identical token counts even though
their prompts differ in measured timings.

Every request is appended to --log as one JSON line (op, attempt, purpose, prompt characters,
and the messages themselves) for the tests to inspect. Stdlib only; stops on SIGTERM.
"""
import argparse
import json
import math
import os
import re
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TASK_RE = re.compile(r"operator `([^`]+)` \u2014 attempt (\d+) of (\d+)")
REFLECT_RE = re.compile(r"# Reflection: operator `([^`]+)`")
REFERENCE_RE = re.compile(r"The reference implementation[^\n]*\n```cpp\n(.*?)\n```", re.S)


def read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kope-fake-llm/1"

    def log_message(self, fmt, *args):  # quiet
        pass

    def reply(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path.rstrip("/").endswith("/models"):
            self.reply(200, {"object": "list", "data": [{"id": "fake-kernel-model", "object": "model"}]})
        else:
            self.reply(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self.reply(404, {"error": {"message": "unknown endpoint " + self.path, "type": "invalid_request_error"}})
            return
        try:
            req = json.loads(raw)
            messages = req["messages"]
        except (ValueError, KeyError):
            self.reply(400, {"error": {"message": "bad request body", "type": "invalid_request_error"}})
            return
        cfg = self.server.cfg
        system = "".join(m.get("content", "") for m in messages if m.get("role") == "system")
        user = "".join(m.get("content", "") for m in messages if m.get("role") == "user")
        op, attempt, purpose = "", 0, "kernel"
        m = TASK_RE.search(user)
        r = REFLECT_RE.search(user)
        if r and "lessons" in system:
            purpose, op = "reflect", r.group(1)
            text = read(os.path.join(cfg.fixtures, op, "reflect.json")) or read(
                os.path.join(cfg.fixtures, "reflect.json")) or '{"lessons": []}'
        elif m:
            op, attempt = m.group(1), int(m.group(2))
            # Per-backend answers (FIXTURES/NAME/opencl/K.md, FIXTURES/NAME/cuda/K.md) when the
            # system message is the OpenCL or the CUDA one; the backend-neutral files otherwise
            # and as the fallback.
            dirs = [os.path.join(cfg.fixtures, op)]
            if "OpenCL C" in system:
                dirs.insert(0, os.path.join(cfg.fixtures, op, "opencl"))
            if "CUDA kernels" in system:
                dirs.insert(0, os.path.join(cfg.fixtures, op, "cuda"))
            text = None
            for d in dirs:
                text = text or read(os.path.join(d, "%d.md" % attempt)) or read(os.path.join(d, "default.md"))
            ref = REFERENCE_RE.search(user) if cfg.echo_reference else None
            if not text and ref:
                text = "OPTIMISATION: the reference implementation, unchanged\n```cpp\n%s\n```\n" % ref.group(1)
            text = text or "I have no kernel for this operator."
        else:
            text = "I do not understand the request."
        prompt_chars = sum(len(m.get("content", "")) for m in messages)
        if cfg.usage == "fixed" or "fixed-usage" in str(req.get("model", "")):
            prompt_tokens = 1000 + 10 * attempt + (500 if purpose == "reflect" else 0)
        else:
            prompt_tokens = math.ceil(prompt_chars / 4)
        completion_tokens = math.ceil(len(text) / 4)
        with self.server.lock:
            self.server.count += 1
            n = self.server.count
            if cfg.log:
                with open(cfg.log, "a", encoding="utf-8") as f:
                    f.write(json.dumps({"n": n, "op": op, "attempt": attempt, "purpose": purpose,
                                        "prompt_chars": prompt_chars, "model": req.get("model"),
                                        "max_tokens": req.get("max_tokens") or req.get("max_completion_tokens"),
                                        "messages": messages}) + "\n")
        self.reply(200, {
            "id": "chatcmpl-fake-%d" % n,
            "object": "chat.completion",
            "created": 0,
            "model": req.get("model", "fake-kernel-model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        })


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--log")
    ap.add_argument("--usage", choices=["estimate", "fixed"], default="estimate")
    ap.add_argument("--echo-reference", action="store_true")
    cfg = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", cfg.port), Handler)
    server.daemon_threads = True
    server.cfg = cfg
    server.lock = threading.Lock()
    server.count = 0
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    if cfg.port_file:
        tmp = cfg.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(server.server_address[1]))
        os.replace(tmp, cfg.port_file)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
