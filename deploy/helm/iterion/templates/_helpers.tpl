{{/* The chart's name. */}}
{{- define "iterion.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name, at most 63 characters (a DNS label). */}}
{{- define "iterion.fullname" -}}
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

{{- define "iterion.selectorLabels" -}}
app.kubernetes.io/name: {{ include "iterion.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "iterion.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "iterion.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "iterion.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "iterion.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret holding serve's secrets: the operator's, or the chart's. */}}
{{- define "iterion.secretName" -}}
{{- default (include "iterion.fullname" .) .Values.secrets.existingSecret }}
{{- end }}

{{- define "iterion.claimName" -}}
{{- default (include "iterion.fullname" .) .Values.persistence.existingClaim }}
{{- end }}

{{/* serve.yml: the operator's config, with the chart's addr and store. */}}
{{- define "iterion.serveConfig" -}}
{{- $cfg := deepCopy .Values.config }}
{{- $_ := set $cfg "addr" (printf ":%v" .Values.service.port) }}
{{- $_ := set $cfg "store" "/data" }}
{{- toYaml $cfg }}
{{- end }}
