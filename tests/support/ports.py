"""Ports for servers a test starts in another process: the benchmarks' allocator
(:mod:`bench.ports`), which hands each out so that nothing else takes it before that
process binds, and no other test or benchmark process is handed it for a while."""

from bench.ports import free_port, port_is_free

__all__ = ["free_port", "port_is_free"]
