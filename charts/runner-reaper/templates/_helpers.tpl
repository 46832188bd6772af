{{/*
The chart's name, and the objects' full name. The full name is cut at 52
characters, not 63: a CronJob's name may not be longer, as each Job's name
adds 11. A cut may end on any character of a release's name, "." and "-"
(one or several) included, and a name ending in either is refused by the
API server and by the binary's REAPER_LEDGER: the cut's tail of them goes.
*/}}
{{- define "runner-reaper.name" -}}
{{- regexReplaceAll "[-.]+$" (default .Chart.Name .Values.nameOverride | toString | trunc 52) "" }}
{{- end }}

{{- define "runner-reaper.fullname" -}}
{{- $full := "" }}
{{- if .Values.fullnameOverride }}
{{- $full = .Values.fullnameOverride | toString }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride | toString }}
{{- if contains $name .Release.Name }}
{{- $full = .Release.Name }}
{{- else }}
{{- $full = printf "%s-%s" .Release.Name $name }}
{{- end }}
{{- end }}
{{- regexReplaceAll "[-.]+$" ($full | trunc 52) "" }}
{{- end }}

{{/*
The chart's own labels, as YAML; every value is quoted, so none, however
spelled, is read as anything but a string. The version is the image's tag
that runs (image.tag, else the appVersion it defaults to), cut to a label
value; a checkout's chart pinned by digest alone has none to give.
*/}}
{{- define "runner-reaper.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/name: {{ include "runner-reaper.name" . | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
{{- with regexReplaceAll "^[-_.]+|[-_.]+$" (.Values.image.tag | default .Chart.AppVersion | toString | replace "+" "_" | trunc 63) "" }}
app.kubernetes.io/version: {{ . | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
{{- end }}

{{/*
A value of the user's (a map, a list, a scalar) as block YAML, for
nindent: every key and every string quoted as Go quotes it (quote), which
escapes each character that is not printable, so that no key or string
can end its line, and each arrives whole. Not toYaml: it writes U+0085, a
line break to YAML, as itself, and the reader folds it into a space.
*/}}
{{- define "runner-reaper.yaml" -}}
{{- $v := . }}
{{- if and (kindIs "map" $v) $v }}
{{- range $i, $k := keys $v | sortAlpha }}
{{- if $i }}{{ "\n" }}{{ end }}
{{- $k | quote }}:{{ include "runner-reaper.yamlTail" (get $v $k) }}
{{- end }}
{{- else if and (kindIs "slice" $v) $v }}
{{- range $i, $e := $v }}
{{- if $i }}{{ "\n" }}{{ end }}
{{- if and (kindIs "map" $e) $e }}
{{- /* A map's first key on the dash's line, as YAML is usually written. */}}
{{- printf "- %s" (include "runner-reaper.yaml" $e | nindent 2 | trimPrefix "\n  ") }}
{{- else }}
{{- "-" }}{{ include "runner-reaper.yamlTail" $e }}
{{- end }}
{{- end }}
{{- else if kindIs "map" $v }}
{{- "{}" }}
{{- else if kindIs "slice" $v }}
{{- "[]" }}
{{- else if kindIs "string" $v }}
{{- $v | quote }}
{{- else }}
{{- $v | toJson }}
{{- end }}
{{- end }}

{{/*
What follows a key's colon or a list's dash: a non-empty map or list on
the lines below, indented, else a space and the scalar.
*/}}
{{- define "runner-reaper.yamlTail" -}}
{{- if and (or (kindIs "map" .) (kindIs "slice" .)) . }}
{{- include "runner-reaper.yaml" . | nindent 2 }}
{{- else }}
{{- printf " %s" (include "runner-reaper.yaml" .) }}
{{- end }}
{{- end }}

{{/*
Labels of the chart's (.own, a dict) and a user's (.user, the value .at),
as YAML: the user's are added, but never replace one of the chart's (the
schema refuses such a key; this holds with --skip-schema-validation too).
*/}}
{{- define "runner-reaper.withLabels" -}}
{{- $user := .user | default dict }}
{{- if not (kindIs "map" $user) }}
{{- fail (printf "%s must be a map of label keys to strings" .at) }}
{{- end }}
{{- include "runner-reaper.yaml" (merge (dict) .own $user) }}
{{- end }}

{{/*
The Secret's keys, by github.secretLayout: reaper's, named by the values
(token and private-key when empty), or ARC's own, which its
gha-runner-scale-set and controller read from a githubConfigSecret.
*/}}
{{- define "runner-reaper.arcSecret" -}}
{{- if eq (toString .Values.github.secretLayout) "arc" }}true{{ end }}
{{- end }}

{{- define "runner-reaper.tokenKey" -}}
{{- if include "runner-reaper.arcSecret" . }}github_token{{ else }}{{ .Values.github.tokenKey | default "token" }}{{ end }}
{{- end }}

{{- define "runner-reaper.privateKeyKey" -}}
{{- if include "runner-reaper.arcSecret" . }}github_app_private_key{{ else }}{{ .Values.github.app.privateKeyKey | default "private-key" }}{{ end }}
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
print as 1e+06). An integer comes out, whatever comes in: never text that
could start another line.
*/}}
{{- define "runner-reaper.integer" -}}
{{- printf "%d" (int64 .) }}
{{- end }}

{{/*
A GitHub App's or installation's id: a string as written (the schema lets
an id above 2^53 be given as one, where a number would already have lost
its last digits as a float64), else a number as runner-reaper.integer
prints it.
*/}}
{{- define "runner-reaper.id" -}}
{{- if kindIs "string" . }}
{{- . }}
{{- else }}
{{- include "runner-reaper.integer" . }}
{{- end }}
{{- end }}

{{/*
The image: repository@digest when image.digest is set (the tag is then
only a name), else repository:tag, the tag defaulting to the chart's
appVersion. runner-reaper.validate has made sure there is one of the
three: the chart never guesses a tag.
*/}}
{{- define "runner-reaper.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" (toString .Values.image.repository) (toString .Values.image.digest) }}
{{- else }}
{{- printf "%s:%s" (toString .Values.image.repository) (.Values.image.tag | default .Chart.AppVersion | toString) }}
{{- end }}
{{- end }}

{{/*
REAPER_METRICS_INSTANCE when metrics.instance is empty: NAMESPACE.FULLNAME,
as two releases of one name in two namespaces share a full name, and their
pushes would replace each other's. A namespace holds no ".", so no two
pairs give one name. It must be 1 to 63 of letters, digits, . _ -
starting with a letter or digit (the binary's rule): a longer one keeps
its first 54 characters, less any "." or "-" they end on, and adds "-" and
8 hex digits of the whole name's SHA-256, so it stays unique.
*/}}
{{- define "runner-reaper.metricsInstance" -}}
{{- $full := printf "%s.%s" .Release.Namespace (include "runner-reaper.fullname" .) }}
{{- if le (len $full) 63 }}
{{- $full }}
{{- else }}
{{- printf "%s-%s" (regexReplaceAll "[-.]+$" (trunc 54 $full) "") (sha256sum $full | trunc 8) }}
{{- end }}
{{- end }}

{{/*
A Go duration (time.ParseDuration's syntax, which the schema checks) in
seconds, or "" when the text is not one; for comparing durations with
numbers of seconds, which no schema can. A term below the second is
divided by its power of ten rather than multiplied by its inverse, which
no float64 holds exactly: 50000ms is 50, not a hair above or below.
*/}}
{{- define "runner-reaper.seconds" -}}
{{- $d := toString . }}
{{- $per := dict "ns" 1e9 "us" 1e6 "µs" 1e6 "μs" 1e6 "ms" 1e3 "s" 1.0 "m" 1.0 "h" 1.0 }}
{{- $times := dict "ns" 1.0 "us" 1.0 "µs" 1.0 "μs" 1.0 "ms" 1.0 "s" 1.0 "m" 60.0 "h" 3600.0 }}
{{- $term := "([0-9]+\\.?[0-9]*|\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)" }}
{{- if regexMatch (printf "^[+]?(%s)+$" $term) $d }}
{{- $total := 0.0 }}
{{- range regexFindAll $term $d -1 }}
{{- $n := regexFind "^[0-9]*\\.?[0-9]*" . }}
{{- $u := trimPrefix $n . }}
{{- $total = addf $total (divf (mulf (float64 $n) (get $times $u)) (get $per $u)) }}
{{- end }}
{{- $total }}
{{- end }}
{{- end }}

{{/*
The namespaces of the cluster's own, where the chart grants nothing: a Role
there would let the reaper (and, with lambdaAccess, the Lambda's group)
delete kube-system's pods, or create ConfigMaps beside its components'.
*/}}
{{- define "runner-reaper.reservedNamespaces" -}}
kube-system,kube-public,kube-node-lease
{{- end }}

{{/*
What the schema checks that would widen the chart's rights or break its
YAML if it did not hold, checked again here, so that
--skip-schema-validation cannot widen them either; what no schema can see,
an image to run when the chart has no appVersion; and the rules across
values the schema cannot say: the sweep's deadline below the Job's (or,
with mode: deployment, below the interval), and a PodDisruptionBudget
that lets a drain evict a replica.
Helm renders every template before it installs any, so one fail here
installs nothing. (helm lint logs a template's fail without failing:
what lint must refuse, the schema refuses.)
*/}}
{{- define "runner-reaper.validate" -}}
{{- if not .Values.scopes }}
{{- fail "scopes is empty: list at least one scope to sweep (REAPER_SCOPES: org:NAME, repo:OWNER/NAME or enterprise:SLUG); the chart has no default, e.g. --set 'scopes={org:my-org}'" }}
{{- end }}
{{- if not (or .Values.image.digest .Values.image.tag .Chart.AppVersion) }}
{{- fail "image.tag and image.digest are empty, and this chart has no appVersion to default to: it is installed from a checkout, not a released chart. Name the image to run, e.g. --set image.tag=v1.2.3, or install a released chart (oci://ghcr.io/runner-reaper/charts/runner-reaper --version X.Y.Z), whose appVersion is its image's tag" }}
{{- end }}
{{- $reserved := splitList "," (include "runner-reaper.reservedNamespaces" .) }}
{{- $dnsLabel := "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$" }}
{{- if not (regexMatch $dnsLabel .Release.Namespace) }}
{{- fail (printf "the release's namespace %q is not a namespace name" .Release.Namespace) }}
{{- end }}
{{- if has .Release.Namespace $reserved }}
{{- fail (printf "the release's namespace is %s, one of the cluster's own (%s): install runner-reaper into its own namespace, or the runners'" .Release.Namespace (join ", " $reserved)) }}
{{- end }}
{{- if not (kindIs "slice" (.Values.namespaces | default list)) }}
{{- fail "namespaces must be a list of namespace names" }}
{{- end }}
{{- range .Values.namespaces }}
{{- if not (and (kindIs "string" .) (regexMatch $dnsLabel (toString .))) }}
{{- fail (printf "namespaces: %q is not a namespace name" (toString .)) }}
{{- end }}
{{- if has . $reserved }}
{{- fail (printf "namespaces: %s is one of the cluster's own (%s), where the chart grants no rights" . (join ", " $reserved)) }}
{{- end }}
{{- end }}
{{- /* The switches: a template tests truthiness, and "false" is a string
that is true, so a switch that is not a boolean would grant a right that
the configuration, which writes the string, says is off. */}}
{{- range $at, $v := dict
  "arc.enabled" .Values.arc.enabled
  "arc.removeFinalizers" .Values.arc.removeFinalizers
  "deleteServiceAccounts" .Values.deleteServiceAccounts
  "deleteUnschedulable" .Values.deleteUnschedulable
  "runnerLog.enabled" .Values.runnerLog.enabled
  "lambdaAccess.enabled" .Values.lambdaAccess.enabled
  "dryRun" .Values.dryRun
  "suspend" .Values.suspend
  "monitoring.prometheusRule.enabled" .Values.monitoring.prometheusRule.enabled
  "monitoring.dashboard.enabled" .Values.monitoring.dashboard.enabled
  "monitoring.serviceMonitor.enabled" .Values.monitoring.serviceMonitor.enabled
  "deployment.pdb.enabled" .Values.deployment.pdb.enabled }}
{{- if not (kindIs "bool" $v) }}
{{- fail (printf "%s must be true or false, without quotes; got %q, a %s, which a template would take for true whatever it says" $at (toString $v) (kindOf $v)) }}
{{- end }}
{{- end }}
{{- if .Values.lambdaAccess.enabled }}
{{- if not (kindIs "string" .Values.lambdaAccess.group) }}
{{- fail "lambdaAccess.group must be a group name" }}
{{- end }}
{{- if hasPrefix "system:" .Values.lambdaAccess.group }}
{{- fail (printf "lambdaAccess.group %q is a Kubernetes system group (system:...), which every node or every authenticated identity may be in: name the group the Lambda's access entry maps its IAM role to" .Values.lambdaAccess.group) }}
{{- end }}
{{- end }}
{{- /* A mode that is neither would render no workload at all. */}}
{{- if not (has .Values.mode (list "cronjob" "deployment")) }}
{{- fail (printf "mode must be cronjob or deployment; got %q" (toString .Values.mode)) }}
{{- end }}
{{- $sweep := include "runner-reaper.seconds" .Values.sweepTimeout }}
{{- if eq (toString .Values.mode) "cronjob" }}
{{- if and $sweep (ge (float64 $sweep) (float64 .Values.activeDeadlineSeconds)) }}
{{- fail (printf "sweepTimeout (%v) must be below activeDeadlineSeconds (%s): the Job is killed at its deadline, before the sweep would write its report" .Values.sweepTimeout (include "runner-reaper.integer" .Values.activeDeadlineSeconds)) }}
{{- end }}
{{- else }}
{{- $service := include "runner-reaper.fullname" . }}
{{- if not (regexMatch "^[a-z]([-a-z0-9]*[a-z0-9])?$" $service) }}
{{- fail (printf "with mode: deployment the Service takes the objects' name, %q, and a Service's name must start with a letter and hold only lower-case letters, digits and -: name the objects with fullnameOverride, e.g. --set fullnameOverride=runner-reaper" $service) }}
{{- end }}
{{- $interval := include "runner-reaper.seconds" .Values.deployment.interval }}
{{- if and $sweep $interval (ge (float64 $sweep) (float64 $interval)) }}
{{- fail (printf "sweepTimeout (%v) must be below deployment.interval (%v): a sweep must end before the next is due" .Values.sweepTimeout .Values.deployment.interval) }}
{{- end }}
{{- if and .Values.deployment.pdb.enabled (ge (int64 .Values.deployment.pdb.minAvailable) (int64 .Values.deployment.replicas)) }}
{{- fail (printf "deployment.pdb.minAvailable (%s) must be below deployment.replicas (%s): otherwise no ready replica may ever be evicted, and a node drain waits for ever; raise deployment.replicas, or set deployment.pdb.enabled=false" (include "runner-reaper.integer" .Values.deployment.pdb.minAvailable) (include "runner-reaper.integer" .Values.deployment.replicas)) }}
{{- end }}
{{- end }}
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
# leaks (as one watch-list, or in pages where that is not available), and
# patch away ARC's registration finalizer once the registration is known
# to be gone.
- apiGroups: ["actions.github.com"]
  resources: ["ephemeralrunners"]
  verbs: ["get"]
- apiGroups: ["actions.github.com"]
  resources: ["ephemeralrunners"]
  verbs: ["list"]
- apiGroups: ["actions.github.com"]
  resources: ["ephemeralrunners"]
  verbs: ["watch"]
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
