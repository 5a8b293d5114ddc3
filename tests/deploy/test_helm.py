"""The Helm chart (deploy/helm/chorus), checked without a cluster and without a network.

* ``helm lint --strict`` passes with the default values and with ``ci/all-on-values.yaml``
  (every optional part on).
* ``helm template`` renders both, and every rendered object is valid against Kubernetes'
  own OpenAPI schemas (kubernetes-validate, strict: an unknown field fails too). KEDA's
  ScaledObject is a custom resource those schemas do not have: it is checked against a
  model of the fields the chart sets (``ScaledObject`` below); so are the Prometheus
  Operator's ServiceMonitor and PrometheusRule, whose alerts read only series the agent
  exports.
* What the chart promises a user: the agent's probes, disruption budget, autoscaler and
  graceful stop; the pipeline's services each behind their own Service at the address the
  pipeline file gives; the credentials in a Secret; only the agent reaching the services
  and the database.
* values.schema.json types every value: a wrong one is refused by ``helm lint`` and
  ``helm template``, naming it; what it cannot compare (an autoscaler's bounds) the
  templates refuse.
* Probes, disruption budget, spreading, ephemeral storage, ServiceAccount and security
  contexts: as values.yaml says, for every pod.
* An experiment's file and arms reach the agent (CHORUS_EXPERIMENT, CHORUS_ARM_KEY) as it
  loads them; a replay Job runs ``chorus replay`` on the same store, and the
  NetworkPolicies let it reach the store and the services.
* A template broken in a copy of the chart fails the validation.

Helm is the binary tools/helm builds (tests/support/helm.py); without Go the tests are
skipped, unless ``REQUIRE_HELM=1``.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import httpx
import kubernetes_validate
import pytest
import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from agent.kinds import load_experiment
from agent.metrics import Metrics
from agent.pipeline.config import parse_pipeline_config
from agent.queues import QUEUE_WAIT
from agent.settings import Settings
from skills.fallback.app import app as fallback_app
from tests.conftest import AgentFactory, service_entry
from tests.support.helm import (
    CHART,
    ROOT,
    Helm,
    HelmError,
    Manifest,
    build_helm,
    helm_required,
    kube_version,
    manifests,
    unavailable_reason,
    validate,
)
from tests.support.servers import ServerThread

ALL_ON = CHART / "ci" / "all-on-values.yaml"
DB_PORT = 27017


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    reason = unavailable_reason()
    if reason is not None:
        if helm_required():
            pytest.fail(f"REQUIRE_HELM=1 but {reason}")
        pytest.skip(reason)
    return Helm(build_helm(), tmp_path_factory.mktemp("helm-home"))


@pytest.fixture(scope="module")
def default_objects(helm: Helm) -> list[Manifest]:
    return helm.template(CHART)


@pytest.fixture(scope="module")
def all_on_objects(helm: Helm) -> list[Manifest]:
    return helm.template(CHART, [ALL_ON])


# -- KEDA's ScaledObject: not in Kubernetes' schemas; the fields the chart sets, no others.


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Metadata(_Strict):
    name: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=63)
    labels: dict[str, str] = {}


class _TargetRef(_Strict):
    name: str


class _Trigger(_Strict):
    type: Literal["cpu", "memory", "prometheus"]
    metricType: Literal["Utilization", "AverageValue", "Value"] | None = None
    metadata: dict[str, str]


class _HpaConfig(_Strict):
    behavior: dict[str, Any]


class _Advanced(_Strict):
    horizontalPodAutoscalerConfig: _HpaConfig


class _ScaledObjectSpec(_Strict):
    scaleTargetRef: _TargetRef
    minReplicaCount: int = Field(ge=0)
    maxReplicaCount: int = Field(ge=1)
    pollingInterval: int = Field(ge=1)
    cooldownPeriod: int = Field(ge=0)
    advanced: _Advanced
    triggers: list[_Trigger] = Field(min_length=1)


class ScaledObject(_Strict):
    """keda.sh/v1alpha1 ScaledObject, as far as the chart writes one (KEDA's CRD)."""

    apiVersion: Literal["keda.sh/v1alpha1"]
    kind: Literal["ScaledObject"]
    metadata: _Metadata
    spec: _ScaledObjectSpec


# -- The Prometheus Operator's ServiceMonitor and PrometheusRule: custom resources too; the
# fields the chart sets, as the operator's CRDs type them.

# A Prometheus duration, as the operator's CRDs write its pattern.
DURATION = (
    r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
)


class _LabelSelector(_Strict):
    matchLabels: dict[str, str] = Field(min_length=1)


class _NamespaceSelector(_Strict):
    matchNames: list[str] = Field(min_length=1)


class _Endpoint(_Strict):
    port: str
    path: str = Field(pattern=r"^/")
    scheme: Literal["http", "https"]
    interval: str | None = Field(default=None, pattern=DURATION)
    scrapeTimeout: str | None = Field(default=None, pattern=DURATION)


class _ServiceMonitorSpec(_Strict):
    selector: _LabelSelector
    namespaceSelector: _NamespaceSelector
    endpoints: list[_Endpoint] = Field(min_length=1)


class ServiceMonitor(_Strict):
    """monitoring.coreos.com/v1 ServiceMonitor, as far as the chart writes one."""

    apiVersion: Literal["monitoring.coreos.com/v1"]
    kind: Literal["ServiceMonitor"]
    metadata: _Metadata
    spec: _ServiceMonitorSpec


class _Rule(_Strict):
    alert: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    expr: str = Field(min_length=1)
    for_: str = Field(alias="for", pattern=DURATION)
    labels: dict[str, str]
    annotations: dict[str, str]


class _RuleGroup(_Strict):
    name: str = Field(min_length=1)
    rules: list[_Rule] = Field(min_length=1)


class _PrometheusRuleSpec(_Strict):
    groups: list[_RuleGroup] = Field(min_length=1)


class PrometheusRule(_Strict):
    """monitoring.coreos.com/v1 PrometheusRule, as far as the chart writes one."""

    apiVersion: Literal["monitoring.coreos.com/v1"]
    kind: Literal["PrometheusRule"]
    metadata: _Metadata
    spec: _PrometheusRuleSpec


CUSTOM_RESOURCES: dict[tuple[str, str], type[BaseModel]] = {
    ("keda.sh/v1alpha1", "ScaledObject"): ScaledObject,
    ("monitoring.coreos.com/v1", "ServiceMonitor"): ServiceMonitor,
    ("monitoring.coreos.com/v1", "PrometheusRule"): PrometheusRule,
}


def validate_all(objects: list[Manifest]) -> None:
    """Every object against Kubernetes' schema of its kind; a custom resource against our
    model of it."""
    for obj in objects:
        model = CUSTOM_RESOURCES.get((obj.get("apiVersion", ""), obj.get("kind", "")))
        if model is not None:
            model.model_validate(obj)
        else:
            validate(obj)


# -- Reading what was rendered


def find(objects: list[Manifest], kind: str, name: str) -> Manifest:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def of_kind(objects: list[Manifest], kind: str) -> list[Manifest]:
    return [o for o in objects if o["kind"] == kind]


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def pod_labels(deployment: Manifest) -> dict[str, str]:
    labels: dict[str, str] = deployment["spec"]["template"]["metadata"]["labels"]
    return labels


def container(deployment: Manifest) -> dict[str, Any]:
    containers: list[dict[str, Any]] = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def rendered_pipeline(objects: list[Manifest]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        find(objects, "ConfigMap", "chorus-pipeline")["data"]["pipeline.json"]
    )
    return data


def default_pipeline() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ROOT / "pipeline.json").read_text())
    return data


def pipeline_services(pipeline: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for group, services in pipeline["services"].items():
        for name, entry in services.items():
            yield group, name, entry


# -- The values file

# Values the chart passes on whole (Kubernetes objects, the services list): their comment
# above says what they hold, and their inner keys are Kubernetes' or the list's own.
WHOLE_VALUES = {
    "agent.resources",
    "agent.autoscaling.behavior",
    "agent.podAnnotations",
    "agent.env",
    "serviceDefaults.resources",
    "replay.resources",
    "serviceAccount.annotations",
    "security.podSecurityContext",
    "security.containerSecurityContext",
    "services",
    "networkPolicy.dns",
    "networkPolicy.databaseIngress.podLabels",
}


def test_every_value_is_documented() -> None:
    """Each key of values.yaml has a comment on the line above it."""
    lines = (CHART / "values.yaml").read_text().splitlines()
    undocumented = []
    checked = 0
    parents: list[tuple[int, str]] = []  # (indent, dotted path) of the enclosing keys
    for number, line in enumerate(lines, start=1):
        match = re.match(r"^(\s*)([A-Za-z][\w./-]*):", line)
        if match is None:
            continue
        indent = len(match[1])
        while parents and parents[-1][0] >= indent:
            parents.pop()
        path = ".".join([*(p for _, p in parents[-1:]), match[2]])
        parents.append((indent, path))
        if any(path.startswith(f"{whole}.") for whole in WHOLE_VALUES):
            continue
        checked += 1
        if not lines[number - 2].lstrip().startswith("#"):
            undocumented.append(f"line {number}: {path}")
    assert undocumented == []
    assert checked > 50  # the walk saw the file's keys


# -- Lint, render, validate


@pytest.mark.parametrize("values", [[], [ALL_ON]], ids=["default", "all-on"])
def test_lint_passes(helm: Helm, values: list[Path]) -> None:
    result = helm.lint(CHART, values)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("values", "sets"),
    [
        ([], []),
        ([ALL_ON], []),
        ([], ["agent.autoscaling.load.via=customMetrics"]),
        ([], ["agent.autoscaling.enabled=false", "networkPolicy.enabled=false"]),
    ],
    ids=["default", "all-on", "custom-metrics", "fixed-replicas"],
)
def test_every_rendered_object_is_valid_kubernetes(
    helm: Helm, values: list[Path], sets: list[str]
) -> None:
    objects = helm.template(CHART, values, sets)
    assert objects
    validate_all(objects)


def test_a_broken_template_fails_validation(helm: Helm, tmp_path: Path) -> None:
    """A misspelt key renders (Helm does not know Kubernetes' fields) but is no Deployment."""
    chart = tmp_path / "chorus"
    shutil.copytree(CHART, chart)
    template = chart / "templates" / "agent-deployment.yaml"
    text = template.read_text()
    assert text.count("readinessProbe:") == 1
    template.write_text(text.replace("readinessProbe:", "readynessProbe:"))

    objects = helm.template(chart)
    with pytest.raises(kubernetes_validate.ValidationError, match="readynessProbe"):
        validate_all(objects)


def test_a_wrong_value_inside_a_kubernetes_object_fails_validation(helm: Helm) -> None:
    """The schema leaves the Kubernetes objects the chart passes on whole to Kubernetes'."""
    objects = helm.template(
        CHART, sets=["agent.autoscaling.behavior.scaleDown.stabilizationWindowSeconds=long"]
    )
    with pytest.raises(kubernetes_validate.ValidationError, match="long"):
        validate_all(objects)


# -- The values' schema (values.schema.json)

SCHEMA = CHART / "values.schema.json"


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    if "$ref" not in schema:
        return schema
    node = root
    for part in schema["$ref"].removeprefix("#/").split("/"):
        node = node[part]
    return {**node, **{k: v for k, v in schema.items() if k != "$ref"}}


def _untyped(values: Any, schema: dict[str, Any], root: dict[str, Any], path: str) -> list[str]:
    """The keys under ``values`` the schema gives no type, walking down as far as the
    schema has properties (below that, an object is passed on whole: its own schema is
    Kubernetes' or the pipeline file's)."""
    schema = _resolve(schema, root)
    found = []
    if not ({"type", "enum", "oneOf"} & set(schema)):
        found.append(path)
    if isinstance(values, dict) and "properties" in schema:
        for key, value in values.items():
            sub = schema["properties"].get(key)
            if sub is None:
                found.append(f"{path}.{key}")
            else:
                found += _untyped(value, sub, root, f"{path}.{key}".lstrip("."))
    if isinstance(values, list) and "properties" in schema.get("items", {}):
        for number, item in enumerate(values):
            found += _untyped(item, schema["items"], root, f"{path}[{number}]")
    return found


def _object_schemas(schema: Any) -> Iterator[dict[str, Any]]:
    if isinstance(schema, dict):
        if "properties" in schema:
            yield schema
        for key, value in schema.items():
            if key not in ("if", "then"):  # conditions on the object, not objects
                yield from _object_schemas(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _object_schemas(value)


@pytest.mark.parametrize("values", [CHART / "values.yaml", ALL_ON], ids=["default", "all-on"])
def test_every_value_has_a_type_in_the_schema(values: Path) -> None:
    """Each key of values.yaml (and of the all-on values) is typed by the schema, and the
    schema refuses keys it does not know (a misspelt key fails instead of being ignored)."""
    schema = json.loads(SCHEMA.read_text())
    assert _untyped(yaml.safe_load(values.read_text()), schema, schema, "") == []
    assert all(s.get("additionalProperties") is False for s in _object_schemas(schema))


BAD_VALUES: list[tuple[str, dict[str, Any], str]] = [
    ("replicas-two", {"agent": {"replicas": "two"}}, "/agent/replicas"),
    ("pull-policy", {"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
    ("port-0", {"agent": {"port": 0}}, "/agent/port"),
    ("service-type", {"agent": {"service": {"type": "Ingress"}}}, "/agent/service/type"),
    (
        "max-replicas-1",
        {"agent": {"autoscaling": {"maxReplicas": 1}}},
        "/agent/autoscaling/maxReplicas",
    ),
    ("timeout-fast", {"serviceDefaults": {"timeout": "fast"}}, "/serviceDefaults/timeout"),
    ("turn-timeout-0", {"pipeline": {"turnTimeout": 0}}, "/pipeline/turnTimeout"),
    ("misspelt-key", {"agent": {"replica": 3}}, "'replica'"),
    ("tmp-size", {"security": {"tmpSizeLimit": "lots"}}, "/security/tmpSizeLimit"),
    ("db-port", {"networkPolicy": {"databasePorts": [70000]}}, "/networkPolicy/databasePorts/0"),
    (
        "min-available",
        {"agent": {"podDisruptionBudget": {"minAvailable": "half"}}},
        "/agent/podDisruptionBudget/minAvailable",
    ),
    (
        "load-via",
        {"agent": {"autoscaling": {"load": {"via": "prometheus"}}}},
        "/agent/autoscaling/load/via",
    ),
    ("scrape-interval", {"serviceMonitor": {"interval": "often"}}, "/serviceMonitor/interval"),
    ("fallback-share", {"prometheusRule": {"fallbackShare": 20}}, "/prometheusRule/fallbackShare"),
    ("path-type", {"ingress": {"pathType": "Regex"}}, "/ingress/pathType"),
    ("ingress-host", {"ingress": {"hosts": ["https://chat"]}}, "/ingress/hosts/0"),
]


def _with_service(**changes: Any) -> dict[str, Any]:
    services = yaml.safe_load((CHART / "values.yaml").read_text())["services"]
    services[0].update(changes)
    return {"services": services}


BAD_VALUES += [
    ("service-timeout", _with_service(timeout="fast"), "/services/0/timeout"),
    ("service-group", _with_service(group="skill"), "/services/0/group"),
    ("service-context", _with_service(contextWindow=0), "/services/0/contextWindow"),
    ("service-name", _with_service(name="Tokens"), "/services/0/name"),
]


@pytest.mark.parametrize(
    ("values", "message"), [(v, m) for _, v, m in BAD_VALUES], ids=[i for i, _, _ in BAD_VALUES]
)
@pytest.mark.parametrize("command", ["lint", "template"])
def test_the_schema_refuses_bad_values_naming_them(
    helm: Helm, tmp_path: Path, command: str, values: dict[str, Any], message: str
) -> None:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    if command == "lint":
        result = helm.lint(CHART, [path])
        assert result.returncode != 0
        assert message in result.stdout + result.stderr, result.stdout + result.stderr
    else:
        with pytest.raises(HelmError, match=re.escape(message)):
            helm.template(CHART, [path])


def test_the_documented_install_renders_and_validates(helm: Helm) -> None:
    """docs/deployment.md's `helm install`, with its --set values, passes the schema."""
    text = (ROOT / "docs" / "deployment.md").read_text()
    install = text[text.index("helm install chorus deploy/helm/chorus") :].split("\nkubectl")[0]
    sets = re.findall(r"--set (\S+)", install)
    assert sets
    sets = [s.replace("$REG", "registry.example.org/chorus").replace("$TAG", "1.0.0") for s in sets]
    objects = helm.template(CHART, sets=sets)
    validate_all(objects)
    result = helm.run("lint", "--strict", str(CHART), *(a for s in sets for a in ("--set", s)))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"agent": {"autoscaling": {"load": {"turnLatencySeconds": 1}}}}, "needs load.via: keda"),
        (
            {"database": {"url": "sqlite:///data/chorus.db"}},
            "database.url: must start with mongodb",
        ),
        ({"database": {"url": ""}}, "database.url: set the MongoDB replica set's URL"),
        ({"secret": {"apiKey": "short"}}, "secret.apiKey: must be at least 16 characters"),
        (
            {"secret": {"operatorKey": "short"}},
            "secret.operatorKey: must be at least 16 characters",
        ),
        (
            {"secret": {"apiKey": "same-key-0123456789", "operatorKey": "same-key-0123456789"}},
            "secret.operatorKey: must not be the API key",
        ),
        (
            {"agent": {"autoscaling": {"minReplicas": 5, "maxReplicas": 3}}},
            "agent.autoscaling.maxReplicas: 3 is below agent.autoscaling.minReplicas (5)",
        ),
        (
            {"serviceDefaults": {"autoscaling": {"minReplicas": 6}}},
            "services.tokens.autoscaling.maxReplicas: 5 is below "
            "services.tokens.autoscaling.minReplicas (6)",
        ),
        (
            {"serviceMonitor": {"enabled": True}, "agent": {"metricsPublic": False}},
            "serviceMonitor.enabled needs agent.metricsPublic: true: a ServiceMonitor cannot "
            "send the X-API-Key header",
        ),
    ],
    ids=[
        "latency-without-keda",
        "sqlite",
        "no-url",
        "short-key",
        "short-operator-key",
        "operator-key-is-api-key",
        "max-below-min",
        "service-max",
        "service-monitor-behind-key",
    ],
)
def test_bad_values_are_refused_naming_the_value(
    helm: Helm, tmp_path: Path, values: dict[str, Any], message: str
) -> None:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    with pytest.raises(HelmError, match=re.escape(message)):
        helm.template(CHART, [path])


# -- The agent


def test_the_agent_has_probes_a_graceful_stop_and_no_privileges(
    default_objects: list[Manifest],
) -> None:
    agent = find(default_objects, "Deployment", "chorus-agent")
    pod = agent["spec"]["template"]["spec"]
    main = container(agent)
    assert main["readinessProbe"]["httpGet"] == {"path": "/ready", "port": "http"}
    assert main["livenessProbe"]["httpGet"] == {"path": "/ping", "port": "http"}
    assert main["ports"][0]["containerPort"] == 4242

    # The stop covers the preStop pause, a message's longest wait in its user's queue and
    # its turn: a rolling update cuts no turn short.
    pause = int(main["lifecycle"]["preStop"]["exec"]["command"][-1])
    turn = rendered_pipeline(default_objects)["turn_timeout"]
    assert pod["terminationGracePeriodSeconds"] > pause + QUEUE_WAIT + turn
    assert agent["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0

    assert main["resources"]["requests"]["cpu"] and main["resources"]["limits"]["memory"]
    security = main["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["runAsNonRoot"] is True and security["runAsUser"] != 0
    assert security["allowPrivilegeEscalation"] is False
    # What must be writable is an emptyDir.
    volumes = {v["name"]: v for v in pod["volumes"]}
    tmp = [m for m in main["volumeMounts"] if m["mountPath"] == "/tmp"]
    assert len(tmp) == 1 and "emptyDir" in volumes[tmp[0]["name"]]


def test_the_agent_scales_on_cpu_and_keeps_one_through_a_drain(
    default_objects: list[Manifest],
) -> None:
    agent = find(default_objects, "Deployment", "chorus-agent")
    hpa = find(default_objects, "HorizontalPodAutoscaler", "chorus-agent")
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "chorus-agent",
    }
    assert hpa["spec"]["minReplicas"] >= 2
    assert [m["resource"]["name"] for m in hpa["spec"]["metrics"]] == ["cpu"]
    # The HPA owns the replica count: a fixed one would be reset on every upgrade.
    assert "replicas" not in agent["spec"]

    pdb = find(default_objects, "PodDisruptionBudget", "chorus-agent")
    assert pdb["spec"]["minAvailable"] >= 1
    assert selects(pdb["spec"]["selector"]["matchLabels"], pod_labels(agent))
    assert not of_kind(default_objects, "ScaledObject")


def test_custom_metrics_scale_on_turns_in_flight(helm: Helm) -> None:
    objects = helm.template(CHART, sets=["agent.autoscaling.load.via=customMetrics"])
    hpa = find(objects, "HorizontalPodAutoscaler", "chorus-agent")
    pods = [m["pods"] for m in hpa["spec"]["metrics"] if m["type"] == "Pods"]
    assert pods == [
        {
            "metric": {"name": "chorus_turns_in_flight"},
            "target": {"type": "AverageValue", "averageValue": "16"},
        }
    ]


def test_keda_scales_on_cpu_turns_in_flight_and_latency(all_on_objects: list[Manifest]) -> None:
    scaled = ScaledObject.model_validate(find(all_on_objects, "ScaledObject", "chorus-agent"))
    assert scaled.spec.scaleTargetRef.name == "chorus-agent"
    triggers = {t.metadata.get("query", t.type): t for t in scaled.spec.triggers}
    assert triggers.pop("cpu").metadata == {"value": "70"}
    queries = sorted(triggers)
    assert queries[0].startswith("histogram_quantile(0.9, ") and "chorus_turn_seconds" in queries[0]
    assert queries[1].startswith("sum(chorus_turns_in_flight{")
    assert 'namespace="chorus"' in queries[1] and 'pod=~"chorus-agent-.*"' in queries[1]
    # KEDA makes the HPA: a second one on the same Deployment would fight it.
    agent_hpas = [
        h
        for h in of_kind(all_on_objects, "HorizontalPodAutoscaler")
        if h["spec"]["scaleTargetRef"]["name"] == "chorus-agent"
    ]
    assert agent_hpas == []


# -- Configuration


@pytest.mark.store_agnostic
@pytest.mark.served  # scraped at its URL, as Prometheus does
def test_the_scrape_the_pod_annotations_ask_for_reads_the_agents_metrics(
    default_objects: list[Manifest],
    services: Callable[[Any], ServerThread],
    agent: AgentFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The agent run with the environment the chart renders (its API key included)
    answers the scrape its ``prometheus.io/*`` annotations ask for, which sends no key:
    KEDA's and the custom metrics' turns in flight come from that scrape."""
    deployment = find(default_objects, "Deployment", "chorus-agent")
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    main = container(deployment)
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == main["ports"][0]["containerPort"]
    secret = find(default_objects, "Secret", "chorus")
    for variable in main["env"]:
        if variable["name"] in ("CHORUS_DB_URL", "CHORUS_PIPELINE"):
            continue  # the test's own database and pipeline
        if "value" in variable:
            value = variable["value"]
        else:
            reference = variable["valueFrom"]["secretKeyRef"]
            assert reference["name"] == "chorus"
            if reference.get("optional") and reference["key"] not in secret["data"]:
                monkeypatch.delenv(variable["name"], raising=False)  # unset, as in the pod
                continue
            value = base64.b64decode(secret["data"][reference["key"]]).decode()
        monkeypatch.setenv(variable["name"], value)
    client = agent(
        {"services": {"skills": {"fallback": service_entry(services(fallback_app).url)}}}
    )

    scrape = httpx.get(f"{str(client.base_url).rstrip('/')}{annotations['prometheus.io/path']}")
    assert scrape.status_code == 200, scrape.text
    assert "chorus_turns_in_flight" in scrape.text
    assert client.get("/api/user/alice").status_code == 401  # the key still guards dialogs


def test_metrics_can_be_kept_behind_the_key(helm: Helm) -> None:
    objects = helm.template(CHART, sets=["agent.metricsPublic=false"])
    env = {e["name"]: e for e in container(find(objects, "Deployment", "chorus-agent"))["env"]}
    assert env["CHORUS_METRICS_PUBLIC"]["value"] == "false"


def test_no_monitoring_objects_or_ingress_unless_asked(default_objects: list[Manifest]) -> None:
    kinds = {o["kind"] for o in default_objects}
    assert not kinds & {"ServiceMonitor", "PrometheusRule", "Ingress"}


def test_the_service_monitor_scrapes_the_agents_metrics(all_on_objects: list[Manifest]) -> None:
    """It selects the agent's Service, and no other, in the release's namespace, and
    scrapes GET /metrics on a port that Service has (the metrics are public: its endpoint
    sends no key)."""
    monitor = find(all_on_objects, "ServiceMonitor", "chorus-agent")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    spec = monitor["spec"]
    assert spec["namespaceSelector"]["matchNames"] == ["chorus"]
    selected = [
        s["metadata"]["name"]
        for s in of_kind(all_on_objects, "Service")
        if selects(spec["selector"]["matchLabels"], s["metadata"]["labels"])
    ]
    assert selected == ["chorus-agent"]
    service = find(all_on_objects, "Service", "chorus-agent")
    [endpoint] = spec["endpoints"]
    assert endpoint["port"] in [p["name"] for p in service["spec"]["ports"]]
    assert endpoint["path"] == "/metrics"
    assert (endpoint["interval"], endpoint["scrapeTimeout"]) == ("15s", "10s")
    env = {
        e["name"]: e for e in container(find(all_on_objects, "Deployment", "chorus-agent"))["env"]
    }
    assert env["CHORUS_METRICS_PUBLIC"]["value"] == "true"


# The series of one metric family, by its type, as Prometheus' text format writes them.
SERIES_SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("", "_count", "_sum", "_created"),
}


def _exported_series() -> set[str]:
    """The series names the agent's /metrics can have (an experiment's too), labelled
    ones included before their first sample."""
    registry = Metrics(services=["tokens"], arms=["control"]).registry
    return {
        family.name + suffix
        for family in registry.collect()
        for suffix in SERIES_SUFFIXES[family.type]
    }


def test_the_alerts_read_series_the_agent_exports(all_on_objects: list[Manifest]) -> None:
    """Each alert of the PrometheusRule reads only series the agent's /metrics has, under
    the job and namespace the ServiceMonitor scrapes them in (its job is the Service's name)."""
    rule = find(all_on_objects, "PrometheusRule", "chorus-agent")
    [group] = rule["spec"]["groups"]
    alerts = {r["alert"]: r for r in group["rules"]}
    assert set(alerts) == {"ChorusFallbackAnswers", "ChorusTurnLatency", "ChorusServiceErrors"}
    exported = _exported_series()
    for name, alert in alerts.items():
        assert alert["labels"] == {"severity": "page"}
        expr = alert["expr"]
        series = re.findall(r"\b(chorus_\w+)\{([^}]*)\}", expr)
        assert series, name
        assert len(series) == expr.count("chorus_"), f"{name}: a series without the selector"
        for metric, matchers in series:
            assert metric in exported, f"{name}: {metric} is not a series the agent exports"
            assert matchers == 'job="chorus-agent", namespace="chorus"'
        assert expr.count("(") == expr.count(")"), name
    assert "chorus_fallback_answers_total" in alerts["ChorusFallbackAnswers"]["expr"]
    assert alerts["ChorusTurnLatency"]["expr"].startswith("histogram_quantile(0.95,")
    assert "by (service)" in alerts["ChorusServiceErrors"]["expr"]


def test_the_alerts_thresholds_and_selector_are_values(helm: Helm, tmp_path: Path) -> None:
    path = tmp_path / "values.yaml"
    values = {
        "prometheusRule": {
            "enabled": True,
            "selector": 'job="kubernetes-pods", namespace="chat"',
            "window": "10m",
            "for": "30m",
            "fallbackShare": 0.05,
            "turnLatencySeconds": 2.5,
            "serviceErrorShare": 0.25,
        }
    }
    path.write_text(yaml.safe_dump(values))
    objects = helm.template(CHART, [path])
    validate_all(objects)
    rules = find(objects, "PrometheusRule", "chorus-agent")["spec"]["groups"][0]["rules"]
    exprs = {r["alert"]: r["expr"] for r in rules}
    assert exprs["ChorusFallbackAnswers"].endswith("> 0.05")
    assert exprs["ChorusTurnLatency"].endswith("> 2.5")
    assert exprs["ChorusServiceErrors"].endswith("> 0.25")
    for expr in exprs.values():
        assert expr.count('{job="kubernetes-pods", namespace="chat"}[10m]') == expr.count("chorus_")
    assert {r["for"] for r in rules} == {"30m"}
    assert not of_kind(objects, "ServiceMonitor")  # the rule alone, for a scrape of one's own


def test_the_ingress_routes_to_the_agents_port(all_on_objects: list[Manifest]) -> None:
    ingress = find(all_on_objects, "Ingress", "chorus-agent")
    spec = ingress["spec"]
    assert spec["ingressClassName"] == "nginx"
    assert ingress["metadata"]["annotations"] == {"cert-manager.io/cluster-issuer": "letsencrypt"}
    assert spec["tls"] == [{"hosts": ["chat.example.org"], "secretName": "chorus-tls"}]
    [rule] = spec["rules"]
    assert rule["host"] == "chat.example.org"
    [path] = rule["http"]["paths"]
    assert (path["path"], path["pathType"]) == ("/", "Prefix")
    service = find(all_on_objects, "Service", "chorus-agent")
    assert path["backend"]["service"]["name"] == "chorus-agent"
    assert path["backend"]["service"]["port"]["name"] in [
        p["name"] for p in service["spec"]["ports"]
    ]


def test_an_ingress_without_hosts_answers_any_host(helm: Helm) -> None:
    objects = helm.template(CHART, sets=["ingress.enabled=true"])
    validate_all(objects)
    ingress = find(objects, "Ingress", "chorus-agent")
    assert "ingressClassName" not in ingress["spec"] and "tls" not in ingress["spec"]
    [rule] = ingress["spec"]["rules"]
    assert "host" not in rule


@pytest.mark.parametrize("which", ["default", "all-on"])
def test_the_pipeline_is_the_default_one_at_the_services_addresses(
    which: str, default_objects: list[Manifest], all_on_objects: list[Manifest]
) -> None:
    objects = default_objects if which == "default" else all_on_objects
    pipeline = rendered_pipeline(objects)
    parse_pipeline_config(pipeline, source="the chart's pipeline")  # as the agent reads it
    # The pipeline's other keys are pipeline.json's: handoffs on once an operator key is set.
    assert pipeline.get("handoff") == default_pipeline().get("handoff")

    expected = {(g, n): e for g, n, e in pipeline_services(default_pipeline())}
    if which == "default":
        expected.pop(("skills", "llm"))  # off until an endpoint is configured
    rendered = {(g, n): e for g, n, e in pipeline_services(pipeline)}
    # In pipeline.json's order: a tie between skills goes to the one listed first.
    assert list(rendered) == list(expected)

    services = {s["metadata"]["name"]: s for s in of_kind(objects, "Service")}
    deployments = of_kind(objects, "Deployment")
    for (group, name), entry in rendered.items():
        want = expected[(group, name)]
        assert entry["connector"]["timeout"] == want["connector"]["timeout"]
        assert entry.get("context_window") == want.get("context_window")
        assert {k: v for k, v in entry.items() if k not in ("connector", "context_window")} == {
            k: v for k, v in want.items() if k not in ("connector", "context_window")
        }
        # The URL is a Service of the chart, on its port, selecting the service's pods.
        host, port = entry["connector"]["url"].removeprefix("http://").split("/")[0].split(":")
        assert entry["connector"]["url"].endswith("/respond")
        service = services[host]
        assert [p["port"] for p in service["spec"]["ports"]] == [int(port)]
        backing = [d for d in deployments if selects(service["spec"]["selector"], pod_labels(d))]
        assert len(backing) == 1
        main = container(backing[0])
        assert main["image"].rsplit("/", 1)[-1].startswith(f"chorus-{name}:")
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert main[probe]["httpGet"] == {"path": "/health", "port": "http"}
        assert main["securityContext"]["readOnlyRootFilesystem"] is True
        assert (
            find(objects, "HorizontalPodAutoscaler", host)["spec"]["scaleTargetRef"]["name"]
            == backing[0]["metadata"]["name"]
        )

    agent = container(find(objects, "Deployment", "chorus-agent"))
    env = {e["name"]: e for e in agent["env"]}
    mount = next(m for m in agent["volumeMounts"] if m["name"] == "pipeline")
    assert env["CHORUS_PIPELINE"]["value"] == f"{mount['mountPath']}/pipeline.json"


def test_credentials_come_from_a_secret(
    default_objects: list[Manifest], all_on_objects: list[Manifest]
) -> None:
    secret = find(default_objects, "Secret", "chorus")
    env = {
        e["name"]: e for e in container(find(default_objects, "Deployment", "chorus-agent"))["env"]
    }
    for name, key in (("CHORUS_DB_URL", "db-url"), ("CHORUS_API_KEY", "api-key")):
        assert env[name]["valueFrom"]["secretKeyRef"] == {"name": "chorus", "key": key}
        assert "value" not in env[name]
    url = base64.b64decode(secret["data"]["db-url"]).decode()
    assert url.startswith("mongodb://") and "replicaSet=" in url and "w=majority" in url
    Settings(db_url=url, api_key=SecretStr(base64.b64decode(secret["data"]["api-key"]).decode()))

    # No operator key unless one is given: the agent reads it only if the Secret has it.
    assert "operator-key" not in secret["data"]
    assert env["CHORUS_OPERATOR_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": "chorus",
        "key": "operator-key",
        "optional": True,
    }

    # An existing Secret: none is rendered, and the agent reads the keys it was told.
    assert not of_kind(all_on_objects, "Secret")
    env = {
        e["name"]: e for e in container(find(all_on_objects, "Deployment", "chorus-agent"))["env"]
    }
    assert env["CHORUS_DB_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": "chorus-credentials",
        "key": "mongodb-url",
    }


def test_an_operator_key_given_reaches_the_agent_from_the_secret(
    helm: Helm, tmp_path: Path
) -> None:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump({"secret": {"operatorKey": "operator-key-0123456789"}}))
    objects = helm.template(CHART, [path])
    validate_all(objects)
    data = find(objects, "Secret", "chorus")["data"]
    key = base64.b64decode(data["operator-key"]).decode()
    api_key = base64.b64decode(data["api-key"]).decode()
    assert key == "operator-key-0123456789"
    Settings(operator_key=SecretStr(key), api_key=SecretStr(api_key))  # as the agent reads them
    ref = _env(find(objects, "Deployment", "chorus-agent"))["CHORUS_OPERATOR_KEY"]
    assert ref["valueFrom"]["secretKeyRef"]["key"] == "operator-key"


# -- Network


def _allowed_ports(rule: dict[str, Any]) -> set[int | str] | None:
    """The ports a NetworkPolicy rule allows, or None for all of them."""
    if "ports" not in rule:
        return None
    return {p["port"] for p in rule["ports"]}


@pytest.mark.parametrize("which", ["default", "all-on"])
def test_only_the_agent_reaches_the_services_and_the_database(
    which: str, default_objects: list[Manifest], all_on_objects: list[Manifest]
) -> None:
    objects = default_objects if which == "default" else all_on_objects
    policies = of_kind(objects, "NetworkPolicy")
    agent = find(objects, "Deployment", "chorus-agent")
    agent_labels = pod_labels(agent)
    jobs = of_kind(objects, "Job")
    replay_labels = pod_labels(jobs[0]) if jobs else {"app.kubernetes.io/component": "none"}
    services = [d for d in of_kind(objects, "Deployment") if d is not agent]
    assert len(services) >= 11

    for deployment in [agent, *services]:
        labels = pod_labels(deployment)
        mine = [
            p
            for p in policies
            if p["metadata"].get("namespace") is None
            and selects(p["spec"]["podSelector"]["matchLabels"], labels)
        ]
        assert mine, f"no NetworkPolicy selects {deployment['metadata']['name']}"
        assert all(set(p["spec"]["policyTypes"]) == {"Ingress", "Egress"} for p in mine)
        egress = [rule for p in mine for rule in p["spec"]["egress"]]
        reaches_db = [r for r in egress if (ports := _allowed_ports(r)) is None or DB_PORT in ports]
        if deployment is agent:
            assert reaches_db
            continue
        assert reaches_db == [], f"{deployment['metadata']['name']} may reach the database"
        # Into a service: only from the agent's pods, only on its port.
        ingress = [rule for p in mine for rule in p["spec"]["ingress"]]
        assert ingress
        for rule in ingress:
            peers = rule["from"]
            assert peers and all(
                set(peer) == {"podSelector"}
                and (
                    selects(peer["podSelector"]["matchLabels"], agent_labels)
                    or selects(peer["podSelector"]["matchLabels"], replay_labels)
                )
                and not any(
                    selects(peer["podSelector"]["matchLabels"], pod_labels(s)) for s in services
                )
                for peer in peers
            )
            assert _allowed_ports(rule) == {"http"}


def test_the_database_admits_only_the_agents(all_on_objects: list[Manifest]) -> None:
    policy = find(all_on_objects, "NetworkPolicy", "chorus-database")
    assert policy["metadata"]["namespace"] == "mongodb"
    agent_labels = pod_labels(find(all_on_objects, "Deployment", "chorus-agent"))
    peers = policy["spec"]["ingress"][0]["from"]
    from_chorus = [
        p
        for p in peers
        if "podSelector" in p
        and "namespaceSelector" in p
        and p["podSelector"]["matchLabels"].get("app.kubernetes.io/component") != "replay"
    ]
    assert len(from_chorus) == 1
    assert from_chorus[0]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "chorus"
    }
    assert from_chorus[0]["podSelector"]["matchLabels"] == {
        k: agent_labels[k] for k in from_chorus[0]["podSelector"]["matchLabels"]
    }
    assert "app.kubernetes.io/component" in from_chorus[0]["podSelector"]["matchLabels"]


# -- Experiments, replays, extra volumes


def _config_files(objects: list[Manifest], configmap: str, into: Path) -> Path:
    """The ConfigMap's files written to a directory, as its volume mounts them."""
    into.mkdir()
    for key, text in find(objects, "ConfigMap", configmap)["data"].items():
        (into / key).write_text(text)
    return into


def _env(deployment_or_job: Manifest) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container(deployment_or_job)["env"]}


def _mounts(deployment_or_job: Manifest) -> dict[str, str]:
    return {m["name"]: m["mountPath"] for m in container(deployment_or_job)["volumeMounts"]}


def test_an_experiment_reaches_the_agent_as_it_loads_it(
    all_on_objects: list[Manifest], tmp_path: Path
) -> None:
    validate_all(all_on_objects)
    agent = find(all_on_objects, "Deployment", "chorus-agent")
    env = _env(agent)
    volumes = {v["name"]: v for v in agent["spec"]["template"]["spec"]["volumes"]}
    mounted = _mounts(agent)
    configmap = volumes["pipeline"]["configMap"]["name"]
    directory = _config_files(all_on_objects, configmap, tmp_path / "etc")
    path = Path(env["CHORUS_EXPERIMENT"]["value"])
    assert path.parent == Path(mounted["pipeline"])

    experiment = load_experiment(directory / path.name, window=3, turn_timeout=None)
    assert experiment.name == "fallback-only-vs-control"
    assert [(a.name, a.weight) for a in experiment.arms] == [("control", 3), ("fallback-only", 1)]
    # The control arm is the chart's own pipeline; the other its own file.
    assert experiment.arms[0].path.name == "pipeline.json"
    arm = json.loads(experiment.arms[1].path.read_text())
    assert list(parse_pipeline_config(arm, source="the arm").services) == ["skills"]
    # The draw's key from the Secret, the same on every replica.
    assert env["CHORUS_ARM_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": "chorus-credentials",
        "key": "arm-key",
    }


def test_the_documented_experiment_renders_and_the_agent_loads_it(
    helm: Helm, tmp_path: Path
) -> None:
    """docs/deployment.md's `helm upgrade` that starts an experiment, candidate.json being
    a copy of pipeline.json."""
    text = (ROOT / "docs" / "deployment.md").read_text()
    start = text.index("helm upgrade chorus deploy/helm/chorus")
    command = text[start : text.index("```", start)].replace("\\\n", " ")
    options = re.findall(r"(--set(?:-file)?) '?([^' ]+)'?", command)
    assert len(options) >= 7
    candidate = tmp_path / "candidate.json"
    shutil.copy(ROOT / "pipeline.json", candidate)
    args = ["template", "chorus", str(CHART), "--namespace", "chorus"]
    args += ["--kube-version", kube_version()]
    for flag, value in options:
        args += [flag, value.replace("candidate.json", str(candidate))]
    result = helm.run(*args)
    assert result.returncode == 0, result.stderr
    objects = manifests(result.stdout)
    validate_all(objects)
    directory = _config_files(objects, "chorus-pipeline", tmp_path / "etc")
    experiment = load_experiment(directory / "experiment.json", window=3, turn_timeout=None)
    assert experiment.names == ["control", "candidate"]
    assert json.loads(experiment.arms[1].path.read_text()) == default_pipeline()


def test_the_chart_makes_the_arm_key_and_an_experiment_change_rolls_the_agents(
    helm: Helm, tmp_path: Path
) -> None:
    values = yaml.safe_load(ALL_ON.read_text())
    experiment = tmp_path / "experiment.yaml"
    experiment.write_text(yaml.safe_dump({"experiment": values["experiment"]}))
    objects = helm.template(CHART, [experiment])
    validate_all(objects)
    secret = find(objects, "Secret", "chorus")
    key = base64.b64decode(secret["data"]["arm-key"]).decode()
    assert len(key) >= 16
    Settings(arm_key=SecretStr(key))
    assert _env(find(objects, "Deployment", "chorus-agent"))["CHORUS_ARM_KEY"]["valueFrom"][
        "secretKeyRef"
    ] == {"name": "chorus", "key": "arm-key"}

    def checksum(objects: list[Manifest]) -> str:
        agent = find(objects, "Deployment", "chorus-agent")
        annotation: str = agent["spec"]["template"]["metadata"]["annotations"]["checksum/pipeline"]
        return annotation

    reweighted = helm.template(CHART, [experiment], ["experiment.arms[0].weight=1"])
    assert checksum(reweighted) != checksum(objects)
    # Without an experiment the agent reads the pipeline file, and there is no arm key.
    plain = helm.template(CHART)
    assert "CHORUS_EXPERIMENT" not in _env(find(plain, "Deployment", "chorus-agent"))
    assert "arm-key" not in find(plain, "Secret", "chorus")["data"]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"experiment": {"enabled": True, "name": "x", "arms": []}}, "/experiment/arms"),
        (
            {"experiment": {"enabled": True, "arms": [{"name": "a", "weight": 1}] * 2}},
            "/experiment/name",
        ),
        (
            {
                "experiment": {
                    "enabled": True,
                    "name": "x",
                    "arms": [{"name": "a", "weight": 1}, {"name": "b b", "weight": 1}],
                }
            },
            "/experiment/arms/1/name",
        ),
        (
            {
                "experiment": {
                    "enabled": True,
                    "name": "x",
                    "arms": [{"name": "a", "weight": 1}, {"name": "b", "weight": 0}],
                }
            },
            "/experiment/arms/1/weight",
        ),
        (
            {
                "experiment": {
                    "enabled": True,
                    "name": "x",
                    "arms": [
                        {"name": "a", "weight": 1},
                        {"name": "b", "weight": 1, "pipeline": "{not json"},
                    ],
                }
            },
            "experiment.arms[1].pipeline (b): not a pipeline file",
        ),
        (
            {
                "experiment": {
                    "enabled": True,
                    "name": "x",
                    "arms": [{"name": "a", "weight": 1}, {"name": "b", "weight": 1}],
                },
                "secret": {"armKey": "short"},
            },
            "secret.armKey: must be at least 16 characters",
        ),
        ({"replay": {"enabled": True, "pipeline": "{not json"}}, "replay.pipeline: not JSON"),
        ({"replay": {"concurrency": 0}}, "/replay/concurrency"),
    ],
    ids=[
        "no-arms",
        "no-name",
        "arm-name",
        "arm-weight",
        "arm-not-json",
        "arm-key",
        "replay-not-json",
        "conc",
    ],
)
def test_a_bad_experiment_or_replay_is_refused_naming_the_value(
    helm: Helm, tmp_path: Path, values: dict[str, Any], message: str
) -> None:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    with pytest.raises(HelmError, match=re.escape(message)):
        helm.template(CHART, [path])


def test_a_replay_job_reads_the_agents_store_with_the_candidate(
    all_on_objects: list[Manifest], tmp_path: Path
) -> None:
    jobs = of_kind(all_on_objects, "Job")
    assert [j["metadata"]["name"] for j in jobs] == ["chorus-replay-1"]
    job = jobs[0]
    validate(job)
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and job["spec"]["backoffLimit"] == 0
    main = container(job)
    args = main["args"]
    assert args[:2] == ["chorus", "replay"]
    assert args[-4:] == ["--since", "2026-01-01", "--limit", "500"]
    options = dict(zip(args[2:-4:2], args[3:-4:2], strict=True))
    assert options["--out"].startswith("/replay/") and options["--html"].startswith("/replay/")
    # The candidate is the file of replay.pipeline, mounted where --pipeline says.
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = _mounts(job)
    candidate = Path(options["--pipeline"])
    name = next(n for n, m in mounts.items() if Path(m) == candidate.parent)
    directory = _config_files(all_on_objects, volumes[name]["configMap"]["name"], tmp_path / "c")
    parse_pipeline_config(json.loads((directory / candidate.name).read_text()), source="replay")
    assert volumes["output"]["persistentVolumeClaim"]["claimName"] == "chorus-replays"
    assert mounts["output"] == "/replay"
    # The store the agents write, from the same Secret; no API key.
    agent_env = _env(find(all_on_objects, "Deployment", "chorus-agent"))
    env = _env(job)
    assert env["CHORUS_DB_URL"] == agent_env["CHORUS_DB_URL"]
    assert "CHORUS_API_KEY" not in env
    assert main["image"] == container(find(all_on_objects, "Deployment", "chorus-agent"))["image"]
    assert main["securityContext"]["readOnlyRootFilesystem"] is True


def test_the_replay_of_the_charts_own_pipeline_needs_no_candidate(helm: Helm) -> None:
    objects = helm.template(CHART, sets=["replay.enabled=true"])
    validate_all(objects)
    job = find(objects, "Job", "chorus-replay-1")
    args = container(job)["args"]
    assert args[args.index("--pipeline") + 1] == "/etc/chorus/pipeline.json"
    assert _mounts(job)["pipeline"] == "/etc/chorus"
    assert "--out" not in args  # no volume for the files: the summary is in the log
    assert not [
        c for c in of_kind(objects, "ConfigMap") if c["metadata"]["name"].endswith("-replay")
    ]
    # The next revision is a new Job (a Job's pod template cannot change).
    assert not of_kind(helm.template(CHART), "Job")


def test_the_replay_reaches_the_store_and_the_services_and_nothing_reaches_it(
    all_on_objects: list[Manifest],
) -> None:
    job = find(all_on_objects, "Job", "chorus-replay-1")
    labels = pod_labels(job)
    policies = [
        p
        for p in of_kind(all_on_objects, "NetworkPolicy")
        if p["metadata"].get("namespace") is None
        and selects(p["spec"]["podSelector"]["matchLabels"], labels)
    ]
    assert [p["metadata"]["name"] for p in policies] == ["chorus-replay"]
    policy = policies[0]["spec"]
    assert set(policy["policyTypes"]) == {"Ingress", "Egress"} and policy["ingress"] == []
    egress = policy["egress"]
    to_db = [r for r in egress if DB_PORT in (_allowed_ports(r) or set())]
    assert to_db and to_db[0]["to"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "mongodb"}}}
    ]
    to_services = [
        r
        for r in egress
        if any(
            "podSelector" in peer and selects(peer["podSelector"]["matchLabels"], {**pod_labels(d)})
            for peer in r.get("to", [])
            for d in of_kind(all_on_objects, "Deployment")
            if d["metadata"]["name"] != "chorus-agent"
        )
    ]
    assert to_services and _allowed_ports(to_services[0]) == {"http"}
    # Each service admits it, and so does the database's own policy.
    for service in of_kind(all_on_objects, "Deployment"):
        if service["metadata"]["name"] == "chorus-agent":
            continue
        mine = [
            p
            for p in of_kind(all_on_objects, "NetworkPolicy")
            if selects(p["spec"]["podSelector"]["matchLabels"], pod_labels(service))
        ]
        peers = [peer for p in mine for rule in p["spec"]["ingress"] for peer in rule["from"]]
        assert any(selects(peer["podSelector"]["matchLabels"], labels) for peer in peers)
    database = find(all_on_objects, "NetworkPolicy", "chorus-database")["spec"]["ingress"][0]
    assert any(
        "namespaceSelector" in peer and selects(peer["podSelector"]["matchLabels"], labels)
        for peer in database["from"]
    )


def test_extra_volumes_are_mounted(all_on_objects: list[Manifest]) -> None:
    for deployment in of_kind(all_on_objects, "Deployment"):
        volumes = {v["name"] for v in deployment["spec"]["template"]["spec"]["volumes"]}
        mounts = _mounts(deployment)
        if deployment["metadata"]["name"] == "chorus-agent":
            assert "faq-corpus" in volumes and mounts["faq-corpus"] == "/etc/chorus-faq"
        else:
            assert "models" in volumes and mounts["models"] == "/models"


# -- Probes, disruption, spreading, storage, identity, security


def _pods(objects: list[Manifest]) -> list[tuple[str, dict[str, Any]]]:
    """The pod spec of every Deployment and Job, by its object's name."""
    return [
        (o["metadata"]["name"], o["spec"]["template"]["spec"])
        for o in objects
        if o["kind"] in ("Deployment", "Job")
    ]


def _window(probe: dict[str, Any]) -> int:
    """Seconds of failed checks before the probe acts (Kubernetes' defaults: 10 s, 3)."""
    return int(probe.get("periodSeconds", 10)) * int(probe.get("failureThreshold", 3))


@pytest.mark.parametrize("which", ["default", "all-on"])
def test_readiness_takes_a_pod_out_before_liveness_restarts_it(
    which: str, default_objects: list[Manifest], all_on_objects: list[Manifest]
) -> None:
    """The agent's probes are two endpoints (/ready checks MongoDB and the required
    services, /ping only the event loop); a service's are one, /health (its only
    dependency is its own loading, which the start-up probe waits for): either way a pod
    that stops answering leaves the Service well before it is restarted."""
    objects = default_objects if which == "default" else all_on_objects
    for deployment in of_kind(objects, "Deployment"):
        main = container(deployment)
        assert _window(main["readinessProbe"]) < _window(main["livenessProbe"])
        assert main["readinessProbe"]["failureThreshold"] >= 1
    agent = container(find(objects, "Deployment", "chorus-agent"))
    assert agent["readinessProbe"]["httpGet"]["path"] != agent["livenessProbe"]["httpGet"]["path"]


def test_the_agents_are_spread_and_a_drain_keeps_one(default_objects: list[Manifest]) -> None:
    agent = find(default_objects, "Deployment", "chorus-agent")
    spread = agent["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert {s["topologyKey"] for s in spread} == {
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
    }
    assert all(
        s["whenUnsatisfiable"] == "ScheduleAnyway"
        and selects(s["labelSelector"]["matchLabels"], pod_labels(agent))
        for s in spread
    )
    find(default_objects, "PodDisruptionBudget", "chorus-agent")
    for service in of_kind(default_objects, "Deployment"):
        keys = [
            s["topologyKey"]
            for s in service["spec"]["template"]["spec"].get("topologySpreadConstraints", [])
        ]
        assert "kubernetes.io/hostname" in keys


def test_a_single_agent_has_no_disruption_budget_to_block_drains(helm: Helm) -> None:
    objects = helm.template(CHART, sets=["agent.autoscaling.enabled=false", "agent.replicas=1"])
    validate_all(objects)
    assert not [p for p in of_kind(objects, "PodDisruptionBudget")]
    objects = helm.template(CHART, sets=["agent.autoscaling.enabled=false", "agent.replicas=2"])
    find(objects, "PodDisruptionBudget", "chorus-agent")


def _bytes(quantity: str) -> int:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return int(quantity.removesuffix(suffix)) * factor
    return int(quantity)


@pytest.mark.parametrize("which", ["default", "all-on"])
def test_every_pod_requests_the_node_disk_it_writes(
    which: str, default_objects: list[Manifest], all_on_objects: list[Manifest]
) -> None:
    objects = default_objects if which == "default" else all_on_objects
    pods = _pods(objects)
    assert len(pods) >= 12
    for name, pod in pods:
        tmp = next(v for v in pod["volumes"] if v["name"] == "tmp")["emptyDir"]
        for main in pod["containers"]:
            resources = main["resources"]
            request = _bytes(resources["requests"]["ephemeral-storage"])
            limit = _bytes(resources["limits"]["ephemeral-storage"])
            assert request <= limit, name
            if tmp.get("medium") != "Memory":  # /tmp on the node's disk counts too
                assert request >= _bytes(tmp["sizeLimit"]), name


def _measured_services() -> dict[str, list[str]]:
    """docs/deployment.md's table of bench.service_resources' figures, by service: its
    cells (idle RSS, peak RSS, CPU, latency, requests, memory limit)."""
    text = (ROOT / "docs" / "deployment.md").read_text()
    table = text.split("| service | idle RSS |", 1)[1].split("\n\n", 1)[0]
    rows = [line.strip("|").split("|") for line in table.splitlines()[2:]]
    return {cells[0].strip(): [c.strip() for c in cells[1:]] for cells in rows}


@pytest.mark.parametrize("which", ["default", "all-on"])
def test_each_service_requests_more_memory_than_it_was_measured_to_hold(
    which: str, default_objects: list[Manifest], all_on_objects: list[Manifest]
) -> None:
    """Each shipped service's memory request is above its peak RSS under load
    (bench.service_resources, docs/deployment.md), its limit above that, as the table
    says the chart sets them; and no service is throttled below one core. The default
    values leave the llm skill off."""
    objects = default_objects if which == "default" else all_on_objects
    measured = _measured_services()
    services = [
        o for o in of_kind(objects, "Deployment") if o["metadata"]["name"] != "chorus-agent"
    ]
    names = {o["metadata"]["name"].removeprefix("chorus-") for o in services}
    assert names == set(measured) - ({"llm"} if which == "default" else set())
    for deployment in services:
        name = deployment["metadata"]["name"].removeprefix("chorus-")
        _, peak, _, _, requests, limit = measured[name]
        resources = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]
        peak_bytes = float(peak.removesuffix(" MiB")) * 2**20
        request = _bytes(resources["requests"]["memory"])
        assert peak_bytes < request < _bytes(resources["limits"]["memory"]), name
        cpu, memory = (part.strip() for part in requests.split(","))
        assert resources["requests"] == {**resources["requests"], "cpu": cpu, "memory": memory}
        assert resources["limits"]["memory"] == limit, name
        assert resources["limits"]["cpu"] == "1", name


def test_no_service_account_token_unless_asked(
    default_objects: list[Manifest], all_on_objects: list[Manifest]
) -> None:
    assert not of_kind(default_objects, "ServiceAccount")
    for _, pod in _pods(default_objects):
        assert pod["automountServiceAccountToken"] is False
        assert "serviceAccountName" not in pod

    account = find(all_on_objects, "ServiceAccount", "chorus")
    validate(account)
    assert account["automountServiceAccountToken"] is False
    assert "iam.gke.io/gcp-service-account" in account["metadata"]["annotations"]
    for name, pod in _pods(all_on_objects):
        assert pod["serviceAccountName"] == "chorus", name
        assert pod["automountServiceAccountToken"] is False


def test_an_existing_service_account_is_used_as_named(helm: Helm) -> None:
    objects = helm.template(CHART, sets=["serviceAccount.name=chorus-runner"])
    assert not of_kind(objects, "ServiceAccount")
    assert {pod["serviceAccountName"] for _, pod in _pods(objects)} == {"chorus-runner"}


def test_security_contexts_add_to_the_charts(all_on_objects: list[Manifest]) -> None:
    validate_all(all_on_objects)
    for name, pod in _pods(all_on_objects):
        assert pod["securityContext"]["fsGroupChangePolicy"] == "OnRootMismatch", name
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for main in pod["containers"]:
            security = main["securityContext"]
            assert security["seLinuxOptions"] == {"level": "s0:c123,c456"}, name
            assert security["readOnlyRootFilesystem"] is True
            assert security["allowPrivilegeEscalation"] is False
            assert security["capabilities"] == {"drop": ["ALL"]}


def test_a_security_context_can_be_loosened_where_a_cluster_needs_it(helm: Helm) -> None:
    objects = helm.template(
        CHART,
        sets=[
            "security.podSecurityContext.seccompProfile.type=Unconfined",
            "security.containerSecurityContext.readOnlyRootFilesystem=false",
            "security.containerSecurityContext.capabilities.add={NET_BIND_SERVICE}",
        ],
    )
    validate_all(objects)
    for name, pod in _pods(objects):
        assert pod["securityContext"]["seccompProfile"] == {"type": "Unconfined"}, name
        for main in pod["containers"]:
            assert main["securityContext"]["readOnlyRootFilesystem"] is False, name
            assert main["securityContext"]["allowPrivilegeEscalation"] is False
            assert main["securityContext"]["capabilities"] == {
                "add": ["NET_BIND_SERVICE"],
                "drop": ["ALL"],
            }
