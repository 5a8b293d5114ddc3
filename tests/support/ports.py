"""Ports for servers a test starts in another process: the tests' band of the benchmarks'
allocator (:mod:`bench.ports`), which hands each out so that nothing else takes it before
that process binds: no other test process is handed it for a while, and no benchmark ever
(the benchmarks have a band of their own)."""

from bench import ports
from bench.ports import port_is_free


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now, that no other test or benchmark is handed."""
    return ports.free_port(ports.TESTS)


__all__ = ["free_port", "port_is_free"]
