"""Which asyncio HTTP framework `iot-api` is built on: aiohttp vs Starlette on uvicorn.

One server process per framework (single worker, default asyncio loop), answering
``POST /events/{topic}`` with a small JSON body: parse it, count the messages, answer
``{"serverTimeMs": .., "count": ..}`` (the trivial work of a publish without Kafka). The load
generator is a separate process of raw keep-alive sockets (pre-built request bytes, so the
client costs as little as possible), ``--connections`` of them, for ``--seconds``.

    python -m bench.http_framework --runs 3 --seconds 5 --connections 32
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import time

from stack.ports import free_port

BODY = json.dumps([{"device": "d1", "seq": i, "t": 21.5} for i in range(3)]).encode()
REQUEST = (
    b"POST /events/bench HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: " + str(len(BODY)).encode() + b"\r\n\r\n" + BODY
)


def _aiohttp_server(port: int) -> None:
    from aiohttp import web

    async def publish(request: web.Request) -> web.Response:
        started = time.monotonic()
        data = json.loads(await request.read())
        count = len(data) if isinstance(data, list) else 1
        ms = int((time.monotonic() - started) * 1000)
        return web.json_response({"serverTimeMs": ms, "count": count})

    app = web.Application()
    app.router.add_post("/events/{topic}", publish)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def _starlette_server(port: int) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def publish(request: Request) -> JSONResponse:
        started = time.monotonic()
        data = json.loads(await request.body())
        count = len(data) if isinstance(data, list) else 1
        ms = int((time.monotonic() - started) * 1000)
        return JSONResponse({"serverTimeMs": ms, "count": count})

    app = Starlette(routes=[Route("/events/{topic}", publish, methods=["POST"])])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


async def _client(port: int, seconds: float, connections: int) -> int:
    deadline = time.monotonic() + seconds
    done = 0

    async def one() -> None:
        nonlocal done
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        while time.monotonic() < deadline:
            writer.write(REQUEST)
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            await reader.readexactly(length)
            done += 1
        writer.close()

    await asyncio.gather(*(one() for _ in range(connections)))
    return done


def _wait_listening(port: int) -> None:
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"server on {port} did not start")


def measure(framework: str, seconds: float, connections: int) -> float:
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "bench.http_framework", "--serve", framework,
                               "--port", str(port)])  # fmt: skip
    try:
        _wait_listening(port)
        asyncio.run(_client(port, 1.0, connections))  # warm-up
        count = asyncio.run(_client(port, seconds, connections))
        return count / seconds
    finally:
        server.terminate()
        server.wait(10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", choices=("aiohttp", "starlette"), help="(internal) serve")
    parser.add_argument("--port", type=int, default=0, help="(internal) port to serve on")
    parser.add_argument("--runs", type=int, default=3, help="runs per framework, interleaved")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of one run")
    parser.add_argument("--connections", type=int, default=32, help="keep-alive connections")
    args = parser.parse_args(argv)
    if args.serve == "aiohttp":
        _aiohttp_server(args.port)
        return 0
    if args.serve == "starlette":
        _starlette_server(args.port)
        return 0
    for run in range(1, args.runs + 1):
        for framework in ("aiohttp", "starlette"):
            rate = measure(framework, args.seconds, args.connections)
            print(f"run {run} {framework:9s} {rate:8.0f} requests/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
