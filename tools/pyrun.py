"""Runs a tools/ script as `python SCRIPT ARGS...` would, in a child forked from a Python process
that imported torch and transformers once for the whole build (about 5 CPU-seconds an import, ~30
scripts a build). Usage: pyrun.py SCRIPT [ARGS...]; SHARDFORMER_PYRUN=0 runs it directly."""

import atexit
import hashlib
import json
import os
import select
import signal
import socket
import struct
import sys
import time

# The server exits after this long with nothing to run: a build's scripts come in bursts.
IDLE_SECONDS = 120
# What every reference script imports; each child then imports only its own model modules.
PRELOAD = ("torch", "numpy", "safetensors.torch", "transformers", "transformers.modeling_utils",
           "transformers.generation", "tokenizers")


def socket_name() -> bytes:
    """An abstract socket per interpreter, this file and environment (libgomp and
    huggingface_hub read theirs when imported): a server serves only clients it equals."""
    key = hashlib.sha256()
    key.update(os.path.realpath(sys.executable).encode())
    key.update(str(os.stat(__file__).st_mtime_ns).encode())
    key.update(json.dumps(sorted(os.environ.items())).encode())
    return b"\0shardformer-pyrun-" + key.hexdigest()[:24].encode()


def send_message(sock: socket.socket, payload: dict, fds: list[int]) -> None:
    data = json.dumps(payload).encode()
    socket.send_fds(sock, [struct.pack("!I", len(data)) + data], fds)


def receive_message(sock: socket.socket) -> tuple[dict, list[int]]:
    data, fds, _, _ = socket.recv_fds(sock, 1 << 20, 3)
    (size,) = struct.unpack("!I", data[:4])
    data = data[4:]
    while len(data) < size:
        more = sock.recv(size - len(data))
        if not more:
            raise ConnectionError("client closed its request early")
        data += more
    return json.loads(data), fds


def run_child(request: dict, fds: list[int]) -> int:
    """In the forked child: becomes `python SCRIPT ARGS...` with the client's stdio, directory and
    environment, and returns the script's exit status."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    script = request["argv"][0]
    sys.argv = list(request["argv"])
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    import runpy
    import traceback
    try:
        runpy.run_path(script, run_name="__main__")
        return 0
    except SystemExit as e:
        if e.code is None:
            return 0
        if isinstance(e.code, int):
            return e.code
        print(e.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def serve(listener: socket.socket) -> None:
    for module in PRELOAD:
        try:
            __import__(module)
        except Exception:  # a child that needs it reports the error itself
            pass
    sys.stdout.flush()
    sys.stderr.flush()
    children: dict[int, socket.socket] = {}  # pid -> its client's connection
    idle_since = time.monotonic()
    while children or time.monotonic() - idle_since < IDLE_SECONDS:
        waiting = [listener, *children.values()]
        readable, _, _ = select.select(waiting, [], [], 0.1)
        for sock in readable:
            if sock is listener:
                conn, _ = listener.accept()
                try:
                    request, fds = receive_message(conn)
                except (OSError, ValueError, ConnectionError):
                    conn.close()
                    continue
                pid = os.fork()
                if pid == 0:
                    for other in (listener, conn, *children.values()):
                        other.close()
                    signal.signal(signal.SIGTERM, signal.SIG_DFL)
                    code = run_child(request, fds)
                    atexit._run_exitfuncs()  # what the interpreter runs before it exits
                    os._exit(code)
                for fd in fds:
                    os.close(fd)
                children[pid] = conn
            else:  # a client went away (its build was stopped): so does its child
                pid = next(p for p, c in children.items() if c is sock)
                os.kill(pid, signal.SIGTERM)
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            conn = children.pop(pid)
            code = os.waitstatus_to_exitcode(status)
            try:
                conn.sendall(struct.pack("!i", code if code >= 0 else 128 - code))
            except OSError:
                pass
            conn.close()
            idle_since = time.monotonic()


def start_server(name: bytes) -> None:
    """Binds the socket (a second server racing for it gives way) and serves in the background."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(name)
    except OSError:
        return
    listener.listen(64)
    if os.fork() != 0:
        listener.close()
        return
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    try:
        serve(listener)
    finally:
        os._exit(0)


def connect(name: bytes) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(name)
        return sock
    except OSError:
        sock.close()
        return None


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    argv = sys.argv[1:]
    direct = [sys.executable, *argv]
    if os.environ.get("SHARDFORMER_PYRUN", "1") == "0":
        os.execv(sys.executable, direct)
    name = socket_name()
    sock = connect(name)
    if sock is None:
        start_server(name)
        sock = connect(name)
    if sock is None:  # no server could start here: run the script as a process of its own
        os.execv(sys.executable, direct)
    sys.stdout.flush()
    sys.stderr.flush()
    send_message(sock, {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}, [0, 1, 2])
    status = b""
    while len(status) < 4:
        more = sock.recv(4 - len(status))
        if not more:
            print(f"pyrun: the server ended before {argv[0]} did", file=sys.stderr)
            return 1
        status += more
    return struct.unpack("!i", status)[0]


if __name__ == "__main__":
    sys.exit(main())
