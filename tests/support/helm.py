"""Helm for the chart's tests: the binary tools/helm builds, rendering, offline validation.

Helm is a Go program: ``tools/helm/build.sh`` builds the version pinned in
``tools/helm/go.mod`` once and caches it under ``.cache/helm/`` (``make helm-tool`` does it
before pytest). Without Go (and no built binary) the tests are skipped, unless
``REQUIRE_HELM=1`` (CI) makes that a failure.

Rendered objects are validated against Kubernetes' own OpenAPI schemas, which the PyPI
package ``kubernetes-validate`` bundles: no cluster and no network. Strict validation
refuses unknown fields, so a misspelt key fails as a wrong type does.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import kubernetes_validate
import kubernetes_validate.utils
import yaml
from kubernetes_validate.utils import latest_version

from tests.support.builds import built_binary

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "chorus"
HELM_DIR = ROOT / "tools" / "helm"
BUILD_SCRIPT = HELM_DIR / "build.sh"

# Kubernetes objects are plain JSON-like mappings.
Manifest = dict[str, Any]


class HelmError(RuntimeError):
    """Helm could not be built, or a helm command failed (the message has its output)."""


def helm_required() -> bool:
    """Whether a missing Helm fails the chart's tests instead of skipping them (CI)."""
    return os.environ.get("REQUIRE_HELM") == "1"


def helm_version() -> str:
    """The Helm version pinned in ``tools/helm/go.mod``, e.g. ``v3.22.0``."""
    for line in (HELM_DIR / "go.mod").read_text().splitlines():
        words = line.split()
        if words[:1] == ["require"]:
            words = words[1:]
        if len(words) >= 2 and words[0] == "helm.sh/helm/v3":
            return words[1]
    raise HelmError("tools/helm/go.mod does not require helm.sh/helm/v3")


def _cached_binary() -> Path | None:
    path = ROOT / ".cache" / "helm" / f"helm-{helm_version()}"
    return path if os.access(path, os.X_OK) else None


def unavailable_reason() -> str | None:
    """Why Helm cannot be had here, or None when Go or a built binary is at hand."""
    if shutil.which("go") is not None or _cached_binary() is not None:
        return None
    return (
        "Helm is not built and Go is not installed: install Go 1.26+ (https://go.dev/dl/) "
        "so that tools/helm/build.sh builds Helm (once; `make helm-tool`)"
    )


def build_helm() -> Path:
    """The Helm binary: built by ``build.sh`` (a no-op when up to date).

    Without Go, an already-built binary is used as it is.
    """
    return built_binary("Helm", BUILD_SCRIPT, _cached_binary(), HelmError)


@functools.cache
def kube_version() -> str:
    """The newest Kubernetes version kubernetes-validate has schemas for, e.g. ``1.37.0``:
    the chart is rendered for it and validated against it."""
    version: str = latest_version()
    return version


# kubernetes-validate reads and parses a kind's schema and the definitions it refers to (a
# few MB of JSON) on every call: once per file here, as the files do not change during a
# run. The parsed schemas are only read (jsonschema does not change a schema it validates
# with).
if not hasattr(kubernetes_validate.utils.schema_contents, "cache_info"):
    kubernetes_validate.utils.schema_contents = functools.cache(
        kubernetes_validate.utils.schema_contents
    )


class Helm:
    """A helm binary run with its own empty configuration and cache (no repositories, no
    network: the chart has no dependencies)."""

    def __init__(self, binary: Path, home: Path) -> None:
        self.binary = binary
        self.env = {
            **os.environ,
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
        }

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run ``helm args...``; the caller looks at the exit status."""
        return subprocess.run(
            [str(self.binary), *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=120,
            check=False,
        )

    def lint(self, chart: Path, values: Sequence[Path] = ()) -> subprocess.CompletedProcess[str]:
        """``helm lint --strict``: warnings fail too."""
        return self.run("lint", "--strict", str(chart), *_values_args(values))

    def template(
        self, chart: Path, values: Sequence[Path] = (), sets: Sequence[str] = ()
    ) -> list[Manifest]:
        """The objects ``helm template`` renders, in order; HelmError when it fails."""
        args = ["template", "chorus", str(chart), "--namespace", "chorus"]
        args += ["--kube-version", kube_version(), *_values_args(values)]
        for item in sets:
            args += ["--set", item]
        result = self.run(*args)
        if result.returncode != 0:
            raise HelmError(f"helm template failed:\n{result.stderr}")
        return manifests(result.stdout)


def manifests(rendered: str) -> list[Manifest]:
    """The objects of ``helm template``'s output, in order. Read with libyaml's loader
    (PyYAML's wheels have it): the safe loader's rules, at a tenth of the pure-Python one's
    cost, which was most of a chart test's time."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return [doc for doc in yaml.load_all(rendered, Loader=loader) if doc]


def _values_args(values: Sequence[Path]) -> list[str]:
    return [arg for path in values for arg in ("--values", str(path))]


def validate(manifest: Manifest) -> None:
    """Check one object against Kubernetes' schema of its kind (strict: unknown fields are
    errors); raises kubernetes_validate's ValidationError, or SchemaNotFoundError for a
    kind Kubernetes does not define (a CRD)."""
    kubernetes_validate.validate(manifest, kube_version(), strict=True)
