{{/*
The chart's name as the objects carry it (app.kubernetes.io/name): nameOverride, else the
chart's own, at most 63 characters (a label value's limit).
*/}}
{{- define "nds-monitor.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The name of every object of the release: fullnameOverride, else the release's name when it
already holds the chart's name (release nds-monitor: nds-monitor), else the two joined; cut to
63 characters, a DNS label's limit.
*/}}
{{- define "nds-monitor.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := .Values.nameOverride | default .Chart.Name }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The helm.sh/chart label: name-version, "+" (not allowed in a label) as "_".
*/}}
{{- define "nds-monitor.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The labels that select the release's pods; they never change across upgrades (a DaemonSet's
selector is immutable).
*/}}
{{- define "nds-monitor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nds-monitor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The labels of every object: the selector's, and the chart, version and manager.
*/}}
{{- define "nds-monitor.labels" -}}
helm.sh/chart: {{ include "nds-monitor.chart" . }}
{{ include "nds-monitor.selectorLabels" . }}
{{- with .Chart.AppVersion }}
app.kubernetes.io/version: {{ . | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
The image: by digest when one is given, else by tag (default: the chart's appVersion).
*/}}
{{- define "nds-monitor.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/*
The URL scheme of /metrics and /healthz: https with a TLS Secret.
*/}}
{{- define "nds-monitor.scheme" -}}
{{- if .Values.tlsSecret }}https{{ else }}http{{ end }}
{{- end }}

{{/*
Whether the pod needs a host path: the device nodes (without CDI), the host's /sys, the
kubelet's PodResources socket, a state directory on the node. "true" or empty.
*/}}
{{- define "nds-monitor.hostPaths" -}}
{{- if or (not .Values.cdiDevice) .Values.hostSysfs .Values.podResources.enabled (eq .Values.stateDir.type "hostPath") }}true{{ end }}
{{- end }}

{{/*
The URL a node's own pod answers at through the Service (internalTrafficPolicy Local): the
node-problem-detector check's.
*/}}
{{- define "nds-monitor.localUrl" -}}
{{- printf "%s://%s.%s.svc:%d" (include "nds-monitor.scheme" .) (include "nds-monitor.serviceName" .) .Release.Namespace (int .Values.port) }}
{{- end }}

{{/*
The Service's name: the one Container Insights looks for, else the release's.
*/}}
{{- define "nds-monitor.serviceName" -}}
{{- if .Values.containerInsights.enabled }}{{ .Values.containerInsights.serviceName }}{{ else }}{{ include "nds-monitor.fullname" . }}{{ end }}
{{- end }}

{{/*
The strictest Pod Security Standard the pod meets with these values. Host paths, the host's
pid namespace and an added PERFMON are beyond "baseline"; root (runAsUser 0) is beyond
"restricted".
*/}}
{{- define "nds-monitor.podSecurityLevel" -}}
{{- if or (include "nds-monitor.hostPaths" .) .Values.hostPID .Values.perfmon }}
{{- "privileged" }}
{{- else if eq (int .Values.runAsUser) 0 }}
{{- "baseline" }}
{{- else }}
{{- "restricted" }}
{{- end }}
{{- end }}

{{/*
One scrape endpoint of the ServiceMonitor or the PodMonitor, after its "port:" line.
*/}}
{{- define "nds-monitor.scrapeEndpoint" -}}
path: /metrics
scheme: {{ include "nds-monitor.scheme" .root }}
{{- with .interval }}
interval: {{ . }}
{{- end }}
{{- if .root.Values.tlsSecret }}
tlsConfig:
  insecureSkipVerify: {{ .root.Values.scrapeTLS.insecureSkipVerify }}
  {{- with .root.Values.scrapeTLS.serverName }}
  serverName: {{ . | quote }}
  {{- end }}
  {{- with .root.Values.scrapeTLS.ca }}
  ca:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
relabelings:
  - sourceLabels: [__meta_kubernetes_pod_node_name]
    targetLabel: node
{{- end }}
