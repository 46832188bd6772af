{{/*
What the CronJob's pod and the Deployment's pod share, so that the two
modes run the same image with the same identity, configuration, Secret
and restrictions, and cannot drift apart. Each is written at the left
margin, for nindent.
*/}}

{{/*
The pod's security context: the restricted Pod Security Standard.
*/}}
{{- define "runner-reaper.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/*
The container's security context: nothing to write, nothing to gain.
*/}}
{{- define "runner-reaper.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
{{- end }}

{{/*
Where the pod may run: the user's nodeSelector, tolerations and affinity.
*/}}
{{- define "runner-reaper.placement" -}}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- include "runner-reaper.yaml" . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- include "runner-reaper.yaml" . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- include "runner-reaper.yaml" . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
The container's variables that are not in the ConfigMap: the credential,
by secretKeyRef from github.existingSecret, and the OTLP endpoint.
*/}}
{{- define "runner-reaper.credentialEnv" -}}
{{- if eq .Values.github.auth "app" }}
{{- if include "runner-reaper.arcSecret" . }}
{{- /* ARC's layout holds the App's ids beside its key. */}}
- name: REAPER_GITHUB_APP_ID
  valueFrom:
    secretKeyRef:
      name: {{ .Values.github.existingSecret | quote }}
      key: github_app_id
- name: REAPER_GITHUB_INSTALLATION_ID
  valueFrom:
    secretKeyRef:
      name: {{ .Values.github.existingSecret | quote }}
      key: github_app_installation_id
{{- end }}
- name: REAPER_GITHUB_PRIVATE_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.github.existingSecret | quote }}
      key: {{ include "runner-reaper.privateKeyKey" . | quote }}
{{- else }}
- name: REAPER_GITHUB_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ .Values.github.existingSecret | quote }}
      key: {{ include "runner-reaper.tokenKey" . | quote }}
{{- end }}
{{- with .Values.metrics.otlpEndpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ . | quote }}
{{- end }}
{{- end }}

{{/*
The pod's labels: the chart's name and instance, by which its logs are
found (and, for the Deployment, its Service, PodDisruptionBudget and
spread select it), with the user's podLabels added.
*/}}
{{- define "runner-reaper.podLabels" -}}
{{- $own := dict "app.kubernetes.io/name" (include "runner-reaper.name" .) "app.kubernetes.io/instance" .Release.Name }}
{{- include "runner-reaper.withLabels" (dict "own" $own "user" .Values.podLabels "at" "podLabels") }}
{{- end }}

{{/*
The labels that select the Deployment's pods: the chart's two pod labels,
which no podLabel may replace.
*/}}
{{- define "runner-reaper.selectorLabels" -}}
app.kubernetes.io/name: {{ include "runner-reaper.name" . | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
{{- end }}

{{- define "runner-reaper.leaseName" -}}
{{- .Values.deployment.leaseName | default (include "runner-reaper.fullname" .) }}
{{- end }}
