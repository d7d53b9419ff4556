{{/*
Names are fixed rather than derived from the release name: the operator
creates controller Deployments that run as the ServiceAccounts
<name>-controller, the RBAC generated into config/ uses these names, and a
cluster has one APIGateway, so one Portico release.
*/}}

{{/* The operator's name: Deployment, ServiceAccount, ClusterRole and Role. */}}
{{- define "portico.operator.name" -}}
portico-operator
{{- end }}

{{- define "portico.chart" -}}
{{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object of the chart. */}}
{{- define "portico.labels" -}}
helm.sh/chart: {{ include "portico.chart" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: portico
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/* The operator pods' selector, immutable once installed. */}}
{{- define "portico.operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "portico.operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels of the operator's objects. */}}
{{- define "portico.operator.labels" -}}
{{ include "portico.labels" . }}
app.kubernetes.io/name: {{ include "portico.operator.name" . }}
{{- end }}

{{/*
Labels of a controller's ServiceAccount and RBAC: the contract's names for
<name>-controller, but managed by Helm, not by the operator.
Call with (dict "root" $ "name" "apirule").
*/}}
{{- define "portico.controller.labels" -}}
{{ include "portico.labels" .root }}
app.kubernetes.io/name: {{ include "portico.controller.binary" .name }}
operator.portico.dev/controller: {{ .name }}
{{- end }}

{{/*
The binary, image, ServiceAccount and RBAC name of catalog entry <name>
(contract.Controller.Binary): <name>-controller, but portico-ratelimit-service
for the rate-limit service.
*/}}
{{- define "portico.controller.binary" -}}
{{- if eq . "ratelimitservice" -}}
portico-ratelimit-service
{{- else -}}
{{ . }}-controller
{{- end }}
{{- end }}

{{/* The catalog entry of a binary name: the inverse of portico.controller.binary. */}}
{{- define "portico.controller.nameOf" -}}
{{- if eq . "portico-ratelimit-service" -}}
ratelimitservice
{{- else -}}
{{ trimSuffix "-controller" . }}
{{- end }}
{{- end }}

{{/* The operator image: repository@digest or repository:tag. */}}
{{- define "portico.operator.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}
{{- end }}

{{/* The RELATED_IMAGE_* variable (OLM convention) of controller <name>: RELATED_IMAGE_<BINARY>. */}}
{{- define "portico.controller.relatedImageEnv" -}}
RELATED_IMAGE_{{ include "portico.controller.binary" . | upper | replace "-" "_" }}
{{- end }}

{{/* Validation that JSON schema cannot express with a clear message. */}}
{{- define "portico.validate" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) }}
{{- fail (printf "replicas is %d but leaderElection.enabled is false: more than one operator replica needs leader election" (int .Values.replicas)) }}
{{- end }}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.enabled) }}
{{- fail "metrics.serviceMonitor.enabled needs metrics.enabled: the ServiceMonitor scrapes the operator's metrics Service" }}
{{- end }}
{{- end }}

{{/*
Non-empty when an APIGateway can be part of this release: the cluster serves
the APIGateway API already, or the chart does not install the CRDs.
*/}}
{{- define "portico.apiGatewayKnown" -}}
{{- if or (not .Values.crds.install) (.Capabilities.APIVersions.Has "operator.portico.dev/v1alpha1/APIGateway") -}}
true
{{- end }}
{{- end }}
