"""Start the local stack: every pipeline service found in this repository, then the agent.

A service named ``NAME`` in group ``G`` lives in ``<folder of G>/NAME/app.py`` (annotators
of every kind in ``annotators/``, ``skills/``, ``skill_selectors/``, ``response_selectors/``);
it is started with uvicorn on the port of its URL in the pipeline file. Services with URLs
elsewhere are expected to be running already.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from agent.pipeline.config import PipelineConfig
from agent.sdk.roles import Role

GROUP_FOLDERS: dict[Role, str] = {
    "annotators": "annotators",
    "candidate_annotators": "annotators",
    "response_annotators": "annotators",
    "skill_selectors": "skill_selectors",
    "skills": "skills",
    "response_selectors": "response_selectors",
}
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}


@dataclass(frozen=True, slots=True)
class LocalService:
    name: str
    module: str
    host: str
    port: int

    @property
    def health_url(self) -> str:
        return f"http://{self.host}:{self.port}/health"


def local_services(config: PipelineConfig, root: Path) -> tuple[list[LocalService], list[str]]:
    """The services this repository can start, and the URLs it cannot (to warn about)."""
    found, elsewhere = [], []
    for group, services in config.services.items():
        for name, service in services.items():
            url = service.connector.url
            if service.off_because() is not None or url is None:
                continue
            folder = GROUP_FOLDERS[group]
            parts = urlsplit(str(url))
            if parts.hostname in LOCAL_HOSTS and (root / folder / name / "app.py").is_file():
                found.append(
                    LocalService(
                        name,
                        f"{folder}.{name}.app:app",
                        parts.hostname or "127.0.0.1",
                        parts.port or 80,
                    )
                )
            else:
                elsewhere.append(f"{name} ({url})")
    return found, elsewhere


def off_services(config: PipelineConfig) -> list[tuple[str, str]]:
    """Services the pipeline lists but does not run now, and why (to show at start-up)."""
    return [
        (name, reason)
        for services in config.services.values()
        for name, service in services.items()
        if (reason := service.off_because()) is not None
    ]


def start(service: LocalService, root: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            service.module,
            "--host",
            service.host,
            "--port",
            str(service.port),
            "--log-level",
            "warning",
            "--no-access-log",
        ],
        cwd=root,
    )


def wait_healthy(
    service: LocalService, process: subprocess.Popen[bytes], timeout: float = 30.0
) -> None:
    """Poll the health route until it answers (a readiness probe for a child process)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"service {service.name} exited with code {process.returncode}")
        try:
            if httpx.get(service.health_url, timeout=1.0).is_success:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(
        f"service {service.name} did not answer {service.health_url} within {timeout:.0f}s"
    )


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
