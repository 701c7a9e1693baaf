{{/* Names ------------------------------------------------------------------------------ */}}

{{- define "sie.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "sie.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "sie.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "sie.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "sie.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Labels: "sie.labels" takes the root context; selector labels add a component. */}}
{{- define "sie.labels" -}}
helm.sh/chart: {{ include "sie.chart" . }}
app.kubernetes.io/name: {{ include "sie.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: sie
{{- end }}

{{- define "sie.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sie.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The priority classes: one JetStream stream per pool and class (sie_server.engine.policy.PRIORITIES). */}}
{{- define "sie.priorities" -}}
interactive batch
{{- end }}

{{/* JetStream stream of a pool and priority: SIE_<POOL>_<PRIORITY>, upper-cased, "-" as "_".
     Input: dict "pool" "priority". */}}
{{- define "sie.streamName" -}}
{{- printf "SIE_%s_%s" .pool .priority | upper | replace "-" "_" }}
{{- end }}

{{/* Name the official NATS chart gives its Service (its "nats.fullname"). */}}
{{- define "sie.natsServiceName" -}}
{{- if .Values.nats.fullnameOverride }}
{{- .Values.nats.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default "nats" .Values.nats.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "sie.natsUrl" -}}
{{- if .Values.nats.enabled }}
{{- printf "nats://%s.%s.svc.%s:4222" (include "sie.natsServiceName" .) .Release.Namespace .Values.clusterDomain }}
{{- else if .Values.externalNats.url }}
{{- .Values.externalNats.url }}
{{- else }}
{{- fail "nats.enabled is false: set externalNats.url (nats://HOST:4222)" }}
{{- end }}
{{- end }}

{{/* The Secret with the NATS login that the user made (global: the NATS chart reads it too); "" if none. */}}
{{- define "sie.natsAuthExistingSecret" -}}
{{- dig "natsAuth" "existingSecret" "" (.Values.global | default dict) }}
{{- end }}

{{/* The Secret holding the NATS login (keys user and password); "" when there is no login. */}}
{{- define "sie.natsAuthSecret" -}}
{{- $existing := include "sie.natsAuthExistingSecret" . }}
{{- if $existing }}
{{- $existing }}
{{- else if .Values.natsAuth.user }}
{{- printf "%s-nats-auth" .Release.Name }}
{{- end }}
{{- end }}

{{/* SIE_NATS_USER and SIE_NATS_PASSWORD from that Secret, as container env entries (nothing without a login). */}}
{{- define "sie.natsAuthEnv" -}}
{{- $secret := include "sie.natsAuthSecret" . }}
{{- if $secret }}
- name: SIE_NATS_USER
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: user
- name: SIE_NATS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: password
{{- end }}
{{- end }}

{{- define "sie.natsMonitoringEndpoint" -}}
{{- if .Values.nats.enabled }}
{{- printf "%s.%s.svc.%s:%v" (include "sie.natsServiceName" .) .Release.Namespace .Values.clusterDomain (.Values.nats.config.monitor.port | default 8222) }}
{{- else if .Values.externalNats.monitoringEndpoint }}
{{- .Values.externalNats.monitoringEndpoint }}
{{- else }}
{{- fail "nats.enabled is false: set externalNats.monitoringEndpoint (HOST:8222) for KEDA" }}
{{- end }}
{{- end }}

{{/* Image of a pool (or of the gateway): input dict "root" . "image" (overrides or nil). */}}
{{- define "sie.image" -}}
{{- $img := mergeOverwrite (deepCopy .root.Values.image) (.image | default dict) }}
{{- $tag := $img.tag | default (printf "%s-cpu" .root.Chart.AppVersion) }}
{{- printf "%s:%s" $img.repository $tag }}
{{- end }}

{{- define "sie.imagePullPolicy" -}}
{{- $img := mergeOverwrite (deepCopy .root.Values.image) (.image | default dict) }}
{{- $img.pullPolicy | default "IfNotPresent" }}
{{- end }}

{{/* Where the catalog is inside the containers. */}}
{{- define "sie.modelsDir" -}}
{{- if .Values.catalog.models }}/models{{ else }}/opt/sie/models{{ end }}
{{- end }}

{{/* Pool names, for checks. */}}
{{- define "sie.poolNames" -}}
{{- range .Values.pools }}{{ .name }} {{ end }}
{{- end }}

{{- define "sie.defaultPool" -}}
{{- if .Values.gateway.defaultPool }}
{{- .Values.gateway.defaultPool }}
{{- else if .Values.pools }}
{{- (first .Values.pools).name }}
{{- else }}
{{- fail "pools is empty: define at least one worker pool" }}
{{- end }}
{{- end }}

{{/* A pool's KEDA settings: the global keda block with the pool's overrides. Returns YAML. */}}
{{- define "sie.poolKeda" -}}
{{- $k := mergeOverwrite (deepCopy .root.Values.keda) (.pool.keda | default dict) }}
{{- toYaml $k }}
{{- end }}
