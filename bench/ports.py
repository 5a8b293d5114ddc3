"""Ports for servers a benchmark or a test starts in another process, handed out so that
nothing else takes them before that process binds.

The kernel's pick for port 0 comes from its ephemeral range, the range every outgoing
connection on the machine also draws its local port from. A port picked that way and
bound seconds later by a child process (``chorus run`` starts fifteen services, FerretDB
takes a while) can be in use by then: a connection of this suite, or of another suite run
beside it, took it, and the child fails with "address already in use". So ports come from
just below the ephemeral range, which no outgoing connection uses, in turn from one
counter that every test and benchmark process on the machine shares under a file lock:
two of them never hand out the same port until the range has gone round.
"""

from __future__ import annotations

import fcntl
import os
import socket
import tempfile
from pathlib import Path

#: Where the machine's test and benchmark processes keep the last port handed out.
_COUNTER = Path(tempfile.gettempdir()) / "chorus-test-ports"
#: How many ports below the ephemeral range are taken turns with.
_SPAN = 8000


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def port_is_free(port: int) -> bool:
    """Whether nothing on this machine holds ``port`` on 127.0.0.1 now."""
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _kernel_pick() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now, that no other test or benchmark process is handed
    for a while."""
    high = _ephemeral_low()
    low = high - _SPAN
    if low < 1024:  # an unusual ephemeral range: no room below it
        return _kernel_pick()
    with open(_COUNTER, "a+", encoding="ascii") as counter:
        fcntl.flock(counter, fcntl.LOCK_EX)  # released when the file closes
        counter.seek(0)
        last = counter.read().strip()
        port = int(last) if last.isdigit() else low + os.getpid() % _SPAN
        for _ in range(_SPAN):
            port = port + 1 if low <= port + 1 < high else low
            if port_is_free(port):
                break
        else:
            return _kernel_pick()
        counter.seek(0)
        counter.truncate()
        counter.write(str(port))
    return port
