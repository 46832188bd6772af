{{/*
The chart's name, and the objects' full name. The full name is cut at 52
characters, not 63: a CronJob's name may not be longer, as each Job's name
adds 11.
*/}}
{{- define "runner-reaper.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 52 | trimSuffix "-" }}
{{- end }}

{{- define "runner-reaper.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "runner-reaper.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "runner-reaper.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | replace "+" "_" | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "runner-reaper.ledgerName" -}}
{{- .Values.ledger.name | default (printf "%s-ledger" (include "runner-reaper.fullname" .)) }}
{{- end }}

{{/*
The namespaces swept: those listed, or the release's own.
*/}}
{{- define "runner-reaper.namespaces" -}}
{{- if .Values.namespaces }}
{{- join "," .Values.namespaces }}
{{- else }}
{{- .Release.Namespace }}
{{- end }}
{{- end }}

{{/*
The namespaces a Role goes into, as a comma-separated list: each swept
namespace, and the release's own, which holds the ledger.
*/}}
{{- define "runner-reaper.roleNamespaces" -}}
{{- $out := list .Release.Namespace }}
{{- range .Values.namespaces }}
{{- $out = append $out . }}
{{- end }}
{{- $out | uniq | join "," }}
{{- end }}

{{/*
A number as the binary reads it: an integer without an exponent (YAML's
numbers reach the template as float64 or json.Number, and 1000000 would
print as 1e+06), a fraction as written.
*/}}
{{- define "runner-reaper.integer" -}}
{{- printf "%d" (int64 .) }}
{{- end }}

{{/*
The Role's rules in namespace .ns, in the kustomize base's order, one verb
per rule like the base: the runner rules where pods are swept, the ledger's
where the release lives, then what each option's component adds. Each
option grants exactly what its component in k8s-cronjob/components does.
*/}}
{{- define "runner-reaper.rules" -}}
{{- $root := .root }}
{{- $swept := has .ns (splitList "," (include "runner-reaper.namespaces" $root)) }}
{{- if $swept }}
# observe: the runner pods, as one watch-list, or in pages
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["watch"]
# act: delete a pod, with UID and resourceVersion preconditions
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["delete"]
# report: one Event per action, on the pod
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
{{- end }}
{{- if eq .ns $root.Release.Namespace }}
# the ledger of marks: read and write only the reaper's own ConfigMap
- apiGroups: [""]
  resources: ["configmaps"]
  resourceNames: [{{ include "runner-reaper.ledgerName" $root | quote }}]
  verbs: ["get"]
- apiGroups: [""]
  resources: ["configmaps"]
  resourceNames: [{{ include "runner-reaper.ledgerName" $root | quote }}]
  verbs: ["update"]
# create cannot be restricted by name: it is needed only if the ledger
# ConfigMap has been deleted, and the reaper creates no other.
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["create"]
{{- end }}
{{- if and $swept $root.Values.arc.enabled }}
# arc.enabled (components/arc): delete a scale-set runner's EphemeralRunner
# or a legacy runner's Runner instead of its pod, list them for ARC's own
# leaks, and patch away ARC's registration finalizer once the registration
# is known to be gone.
- apiGroups: ["actions.github.com"]
  resources: ["ephemeralrunners"]
  verbs: ["get"]
- apiGroups: ["actions.github.com"]
  resources: ["ephemeralrunners"]
  verbs: ["list"]
- apiGroups: ["actions.github.com"]
  resources: ["ephemeralrunners"]
  verbs: ["delete"]
- apiGroups: ["actions.github.com"]
  resources: ["ephemeralrunners"]
  verbs: ["patch"]
- apiGroups: ["actions.summerwind.dev"]
  resources: ["runners"]
  verbs: ["get"]
- apiGroups: ["actions.summerwind.dev"]
  resources: ["runners"]
  verbs: ["list"]
- apiGroups: ["actions.summerwind.dev"]
  resources: ["runners"]
  verbs: ["delete"]
{{- end }}
{{- if and $swept $root.Values.deleteServiceAccounts }}
# deleteServiceAccounts (components/delete-serviceaccounts)
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["delete"]
{{- end }}
{{- end }}

{{/*
Fails the render, naming the file, when a monitoring file the values ask
for is not in the chart: an empty PrometheusRule or dashboard would install
and alert on nothing.
*/}}
{{- define "runner-reaper.monitoringFile" -}}
{{- $content := .root.Files.Get .path }}
{{- if not $content }}
{{- fail (printf "%s is enabled, but the chart has no %s (or it is empty): package the chart with its monitoring files" .value .path) }}
{{- end }}
{{- $content }}
{{- end }}
