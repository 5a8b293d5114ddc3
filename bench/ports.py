"""Ports for servers a benchmark or a test starts in another process, handed out so that
nothing else takes them before that process binds.

The kernel's pick for port 0 comes from its ephemeral range, the range every outgoing
connection on the machine also draws its local port from. A port picked that way and
bound seconds later by a child process (``chorus run`` starts fifteen services, FerretDB
takes a while) can be in use by then: a connection of this suite, or of another suite run
beside it, took it, and the child fails with "address already in use". So ports come from
just below the ephemeral range, which no outgoing connection uses, in turn from a counter
that the machine's processes share under a file lock: two of them never hand out the same
port until the range has gone round.

The tests and the benchmarks each have a band of their own there (:data:`TESTS`,
:data:`BENCHMARKS`): a benchmark run beside the test suites (``bench.llm_turns`` starts two
whole stacks) never takes a port a test was handed and has not bound yet, however many
ports either hands out, and whatever temporary folder holds either's counter.
"""

from __future__ import annotations

import fcntl
import os
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Band:
    """``size`` ports ending ``below`` ports under the start of the ephemeral range, handed
    out in turn through the counter file ``counter`` (in the temporary folder)."""

    counter: str
    below: int
    size: int


#: The test suites' ports: the 6000 just under the ephemeral range.
TESTS = Band("chorus-test-ports", below=0, size=6000)
#: The benchmarks' ports: the 2000 under the tests'.
BENCHMARKS = Band("chorus-bench-ports", below=6000, size=2000)


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


def free_port(band: Band = BENCHMARKS) -> int:
    """A TCP port free on 127.0.0.1 now, of ``band``, that no other process is handed from
    it for a while (the tests take theirs through :mod:`tests.support.ports`)."""
    high = _ephemeral_low() - band.below
    low = high - band.size
    if low < 1024:  # an unusual ephemeral range: no room below it
        return _kernel_pick()
    with open(Path(tempfile.gettempdir()) / band.counter, "a+", encoding="ascii") as counter:
        fcntl.flock(counter, fcntl.LOCK_EX)  # released when the file closes
        counter.seek(0)
        last = counter.read().strip()
        port = int(last) if last.isdigit() else low + os.getpid() % band.size
        for _ in range(band.size):
            port = port + 1 if low <= port + 1 < high else low
            if port_is_free(port):
                break
        else:
            return _kernel_pick()
        counter.seek(0)
        counter.truncate()
        counter.write(str(port))
    return port
