#!/usr/bin/python3
"""ws_echo_server.py - a baseline of bench/serve_bench.c: the least a
Python WebSocket server does for an OpenEnv /ws step.

It runs Debian's python3-websockets (asyncio) on 127.0.0.1, a free port,
and answers every text message with one fixed observation JSON: argv[1],
which the bench sets to the very reply `ludo serve` sent for the same
step, so both servers write frames of the same size. No JSON is parsed
and no environment runs: OpenEnv's own server does all of this and more
per step, so this baseline is faster than OpenEnv is.

usage: /usr/bin/python3 bench/ws_echo_server.py REPLY
Prints the port on stdout, then serves until SIGTERM."""
import asyncio
import sys

import websockets

REPLY = sys.argv[1]


async def handler(ws, path=None):
    try:
        async for _ in ws:
            await ws.send(REPLY)
    except websockets.ConnectionClosed:
        pass


async def main():
    async with websockets.serve(handler, "127.0.0.1", 0,
                                compression=None) as server:
        print(server.sockets[0].getsockname()[1], flush=True)
        await asyncio.Future()


if __name__ == "__main__":
    asyncio.run(main())
