{{/* The release's name prefix of every object, within Kubernetes' 63 characters. */}}
{{- define "chorus.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "chorus.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The labels that select the pods of one component (dict "root" $ "component" name). */}}
{{- define "chorus.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* An autoscaler's bounds, which the values' schema cannot compare (dict "what"
"agent.autoscaling" "autoscaling" .autoscaling): maxReplicas below minReplicas fails. */}}
{{- define "chorus.checkReplicas" -}}
{{- if lt (int .autoscaling.maxReplicas) (int .autoscaling.minReplicas) -}}
{{- fail (printf "%s.maxReplicas: %v is below %s.minReplicas (%v): the autoscaler could never reach its minimum" .what .autoscaling.maxReplicas .what .autoscaling.minReplicas) -}}
{{- end -}}
{{- end -}}

{{/* The agent's object names. */}}
{{- define "chorus.agent" -}}
{{- printf "%s-agent" (include "chorus.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* A pipeline service's object names (dict "root" $ "name" name): <fullname>-<name>. */}}
{{- define "chorus.service" -}}
{{- printf "%s-%s" (include "chorus.fullname" .root) .name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The Secret with CHORUS_DB_URL and CHORUS_API_KEY. */}}
{{- define "chorus.secret" -}}
{{- .Values.secret.existingSecret | default (include "chorus.fullname" .) -}}
{{- end -}}

{{/* An image reference (dict "root" $ "image" .image). */}}
{{- define "chorus.image" -}}
{{- $tag := .image.tag | default .root.Values.image.tag | default .root.Chart.AppVersion -}}
{{- with .root.Values.image.registry -}}{{ . }}/{{- end -}}{{ .image.repository }}:{{ $tag }}
{{- end -}}

{{/* Each enabled pipeline service, serviceDefaults under its own keys, as a YAML list. */}}
{{- define "chorus.services" -}}
{{- $out := list -}}
{{- range .Values.services -}}
{{- if .enabled -}}
{{- if not (regexMatch "^[a-z]([-a-z0-9]*[a-z0-9])?$" .name) -}}
{{- fail (printf "services: %q is not a valid Kubernetes name: lower-case letters, digits and '-', starting with a letter" .name) -}}
{{- end -}}
{{- if not (has .group (list "annotators" "skill_selectors" "skills" "candidate_annotators" "response_selectors")) -}}
{{- fail (printf "services.%s.group: %q is not one of annotators, skill_selectors, skills, candidate_annotators, response_selectors" .name (toString .group)) -}}
{{- end -}}
{{- $out = append $out (mergeOverwrite (deepCopy $.Values.serviceDefaults) (deepCopy .)) -}}
{{- end -}}
{{- end -}}
{{- toYaml (dict "services" $out) -}}
{{- end -}}

{{/* The pipeline file: every enabled service at its Service's address, groups and
services in the order of the services list (a tie between skills goes to the earlier one),
so it is written as text: a dict would sort them. */}}
{{- define "chorus.pipeline" -}}
{{- $services := (include "chorus.services" . | fromYaml).services -}}
{{- $groups := list -}}
{{- range $services -}}
{{- if not (has .group $groups) -}}{{- $groups = append $groups .group -}}{{- end -}}
{{- end -}}
{{- $groupTexts := list -}}
{{- range $group := $groups -}}
{{- $entries := list -}}
{{- range $services -}}
{{- if eq .group $group -}}
{{- $url := printf "http://%s:%v/respond" (include "chorus.service" (dict "root" $ "name" .name)) .port -}}
{{- $entry := dict "connector" (dict "url" $url "timeout" .timeout) "context_window" .contextWindow -}}
{{- $entry = mergeOverwrite $entry (.pipelineEntry | default dict) -}}
{{- $entries = append $entries (printf "%s: %s" (toJson .name) (toJson $entry)) -}}
{{- end -}}
{{- end -}}
{{- $groupTexts = append $groupTexts (printf "%s: {\n      %s\n    }" (toJson $group) (join ",\n      " $entries)) -}}
{{- end -}}
{
  "services": {
    {{ join ",\n    " $groupTexts }}
  },
  "turn_timeout": {{ toJson .Values.pipeline.turnTimeout }},
  "fallback_response": {{ toJson .Values.pipeline.fallbackResponse }}
  {{- with .Values.pipeline.handoff }},
  "handoff": {{ toJson . }}
  {{- end }}
  {{- range $key, $value := .Values.pipeline.extra }},
  {{ toJson $key }}: {{ toJson $value }}
  {{- end }}
}
{{- end -}}

{{/* The experiment file (experiment.enabled), its arms' pipelines beside it in the
ConfigMap: an arm without a pipeline runs the chart's own (pipeline.json). */}}
{{- define "chorus.experiment" -}}
{{- $arms := list -}}
{{- range $index, $arm := .Values.experiment.arms -}}
{{- $file := "pipeline.json" -}}
{{- if $arm.pipeline -}}
{{- $parsed := fromJson $arm.pipeline -}}
{{- if or (hasKey $parsed "Error") (not (hasKey $parsed "services")) -}}
{{- fail (printf "experiment.arms[%d].pipeline (%s): not a pipeline file (JSON with \"services\"): %v" $index $arm.name ($parsed.Error | default "no services")) -}}
{{- end -}}
{{- $file = printf "arm-%s.json" $arm.name -}}
{{- end -}}
{{- $arms = append $arms (dict "name" $arm.name "pipeline" $file "weight" $arm.weight) -}}
{{- end -}}
{{- toPrettyJson (dict "name" .Values.experiment.name "arms" $arms) -}}
{{- end -}}

{{/* The pod labels of the replay Job. */}}
{{- define "chorus.replayPods" -}}
{{- include "chorus.selector" (dict "root" . "component" "replay") }}
{{- end -}}

{{/* The security context of every container: the chart's, security.containerSecurityContext
over it. */}}
{{- define "chorus.containerSecurity" -}}
{{- $uid := .Values.security.runAsUser -}}
{{- $chart := dict "allowPrivilegeEscalation" false "readOnlyRootFilesystem" true "runAsNonRoot" true "runAsUser" $uid "runAsGroup" $uid "capabilities" (dict "drop" (list "ALL")) -}}
{{- toYaml (mergeOverwrite $chart (deepCopy .Values.security.containerSecurityContext)) -}}
{{- end -}}

{{/* The security context of every pod: the chart's, security.podSecurityContext over it. */}}
{{- define "chorus.podSecurity" -}}
{{- $uid := .Values.security.runAsUser -}}
{{- $chart := dict "runAsNonRoot" true "runAsUser" $uid "runAsGroup" $uid "fsGroup" $uid "seccompProfile" (dict "type" "RuntimeDefault") -}}
{{- toYaml (mergeOverwrite $chart (deepCopy .Values.security.podSecurityContext)) -}}
{{- end -}}

{{/* The ServiceAccount of every pod, and whether it mounts a token. */}}
{{- define "chorus.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "chorus.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "chorus.podAccount" -}}
{{- with include "chorus.serviceAccountName" . }}
serviceAccountName: {{ . }}
{{- end }}
automountServiceAccountToken: {{ .Values.serviceAccount.automountToken }}
{{- end -}}

{{/* Best-effort spreading of a component's pods (dict "root" $ "component" name "nodes"
bool "zones" bool). */}}
{{- define "chorus.spread" -}}
{{- $keys := list -}}
{{- if .nodes }}{{ $keys = append $keys "kubernetes.io/hostname" }}{{ end -}}
{{- if .zones }}{{ $keys = append $keys "topology.kubernetes.io/zone" }}{{ end -}}
{{- if $keys }}
topologySpreadConstraints:
{{- range $keys }}
  - maxSkew: 1
    topologyKey: {{ . }}
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- include "chorus.selector" (dict "root" $.root "component" $.component) | nindent 8 }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The writable /tmp of a pod whose root filesystem is read-only. */}}
{{- define "chorus.tmpVolume" -}}
- name: tmp
  emptyDir:
    {{- if .Values.security.tmpfsTmp }}
    medium: Memory
    {{- end }}
    sizeLimit: {{ .Values.security.tmpSizeLimit }}
{{- end -}}

{{/* The label matchers of the agent's series in the PrometheusRule's expressions:
prometheusRule.selector, else the job and namespace the chart's ServiceMonitor scrapes
them under (the job is the agent Service's name). */}}
{{- define "chorus.metricsSelector" -}}
{{- .Values.prometheusRule.selector | default (printf "job=%q, namespace=%q" (include "chorus.agent" .) .Release.Namespace) -}}
{{- end -}}
