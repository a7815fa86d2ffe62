{{/* Names, labels and the configuration file. */}}

{{- define "acd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "acd.fullname" -}}
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

{{- define "acd.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels: stable across upgrades. */}}
{{- define "acd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "acd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Standard labels of every object. */}}
{{- define "acd.labels" -}}
helm.sh/chart: {{ include "acd.chart" . }}
{{ include "acd.selectorLabels" . }}
app.kubernetes.io/version: {{ include "acd.imageTag" . | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/component: cluster-discovery
app.kubernetes.io/part-of: argocd-cluster-discovery
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Labels of the objects Argo CD reads (the token Secret): part-of argocd. */}}
{{- define "acd.argocdLabels" -}}
helm.sh/chart: {{ include "acd.chart" . }}
{{ include "acd.selectorLabels" . }}
app.kubernetes.io/version: {{ include "acd.imageTag" . | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/component: cluster-discovery
app.kubernetes.io/part-of: argocd
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "acd.imageTag" -}}
{{- .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "acd.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (include "acd.imageTag" .) }}
{{- end }}
{{- end }}

{{/* Argo CD's namespace: where Argo CD reads the plugin ConfigMap and token, and where cluster Secrets go. */}}
{{- define "acd.argocdNamespace" -}}
{{- .Values.argocd.namespace | default .Release.Namespace }}
{{- end }}

{{- define "acd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "acd.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "acd.pluginName" -}}
{{- .Values.argocd.plugin.name | default (include "acd.fullname" .) }}
{{- end }}

{{- define "acd.tokenSecretName" -}}
{{- .Values.argocd.token.existingSecret | default (printf "%s-token" (include "acd.fullname" .)) }}
{{- end }}

{{- define "acd.credentialsSecretName" -}}
{{- .Values.credentials.existingSecret | default (printf "%s-credentials" (include "acd.fullname" .)) }}
{{- end }}

{{- define "acd.hasCredentials" -}}
{{- if or .Values.credentials.existingSecret .Values.credentials.stringData }}true{{ end }}
{{- end }}

{{/* Where the pod mounts things; the config directory is the Dockerfile's CMD. */}}
{{- define "acd.configDir" -}}/etc/argocd-cluster-discovery{{- end }}
{{- define "acd.tokenDir" -}}/var/run/secrets/argocd-cluster-discovery/token{{- end }}

{{/* The port serving /healthz, /readyz, /metrics: ops when set, else http. */}}
{{- define "acd.opsPortName" -}}
{{- if .Values.ports.ops }}ops{{ else }}http{{ end }}
{{- end }}

{{- define "acd.ownerID" -}}
{{- $generated := printf "%s.%s" .Release.Namespace .Release.Name | trunc 63 }}
{{- .Values.config.secrets.ownerID | default (regexReplaceAll "[-_.]+$" $generated "") }}
{{- end }}

{{- define "acd.configMapName" -}}
{{- printf "%s-config" (include "acd.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The kubernetes ledger's ConfigMap (its per-source record), in the release namespace. */}}
{{- define "acd.ledgerConfigMapName" -}}
{{- printf "%s-ledger" (include "acd.fullname" .) }}
{{- end }}

{{/* The ledger is kept in the Kubernetes API (ClusterProfiles and a ConfigMap in the release namespace). */}}
{{/* The full name with a suffix, within 63 characters (a Job's name is also its pods' job-name label):
(list . "suffix"). */}}
{{- define "acd.suffixed" -}}
{{- $suffix := index . 1 }}
{{- printf "%s-%s" (include "acd.fullname" (index . 0) | trunc (int (sub 62 (len $suffix))) | trimSuffix "-") $suffix }}
{{- end }}

{{- define "acd.kubernetesLedger" -}}
{{- if eq (((.Values.ledger).kind) | default "kubernetes") "kubernetes" }}true{{ end }}
{{- end }}

{{- define "acd.baseUrl" -}}
{{- if .Values.argocd.plugin.baseUrl }}
{{- .Values.argocd.plugin.baseUrl }}
{{- else }}
{{- printf "http://%s.%s.svc.%s:%d%s" (include "acd.fullname" .) .Release.Namespace .Values.clusterDomain (int .Values.service.port) (.Values.config.server.pathPrefix | default "" | trimSuffix "/") }}
{{- end }}
{{- end }}

{{/*
The configuration file: .Values.config plus what the chart owns (listen addresses, the mounted token, Argo CD's
namespace, the owner id, the ledger). It is the input of the config checksum annotation.
*/}}
{{- define "acd.config" -}}
{{- $c := deepCopy .Values.config }}
{{- $server := deepCopy (.Values.config.server | default dict) }}
{{- $_ := set $server "listen" (printf ":%d" (int .Values.ports.http)) }}
{{- if .Values.ports.ops }}
{{- $_ := set $server "opsListen" (printf ":%d" (int .Values.ports.ops)) }}
{{- end }}
{{- $tokens := list (dict "file" (printf "%s/%s" (include "acd.tokenDir" .) .Values.argocd.token.key)) }}
{{- range .Values.extraTokens }}
{{- $tokens = append $tokens . }}
{{- end }}
{{- $_ := set $server "tokens" $tokens }}
{{- $_ := set $c "server" $server }}
{{- $secrets := deepCopy (.Values.config.secrets | default dict) }}
{{- $_ := set $secrets "namespace" (include "acd.argocdNamespace" .) }}
{{- $_ := set $secrets "ownerID" (include "acd.ownerID" .) }}
{{- $_ := set $c "secrets" $secrets }}
{{- $refresh := deepCopy (.Values.config.applicationSetRefresh | default dict) }}
{{- if $refresh.enabled }}
{{- $_ := set $refresh "pluginConfigMap" (include "acd.pluginName" .) }}
{{- $_ := set $c "applicationSetRefresh" $refresh }}
{{- end }}
{{- if include "acd.kubernetesLedger" . }}
{{- $_ := set $c "ledger" (dict "kind" "kubernetes" "namespace" .Release.Namespace "configMap" (include "acd.ledgerConfigMapName" .)) }}
{{- else }}
{{- $_ := set $c "ledger" (dict "kind" (.Values.ledger).kind) }}
{{- end }}
{{- toYaml $c }}
{{- end }}

{{/* Checks that values alone cannot express in the schema. */}}
{{- define "acd.validate" -}}
{{- $le := ((.Values.config.secrets).leaderElection) | default dict }}
{{- if and (gt (int .Values.replicaCount) 1) .Values.config.secrets.enabled (not $le.enabled) }}
{{- fail "replicaCount > 1 with config.secrets.enabled needs config.secrets.leaderElection.enabled: true (or every replica writes the same Secrets)" }}
{{- end }}
{{- if and (gt (int .Values.replicaCount) 1) (include "acd.kubernetesLedger" .) (not $le.enabled) }}
{{- fail "replicaCount > 1 with ledger.kind kubernetes needs config.secrets.leaderElection.enabled: true (or every replica lists the sources and writes the same ClusterProfiles)" }}
{{- end }}
{{- if and .Values.ports.ops (eq (int .Values.ports.ops) (int .Values.ports.http)) }}
{{- fail "ports.ops must differ from ports.http (set it to 0 to serve both on one port)" }}
{{- end }}
{{- if and .Values.credentials.existingSecret .Values.credentials.stringData }}
{{- fail "set credentials.existingSecret or credentials.stringData, not both" }}
{{- end }}
{{- end }}

{{/* The configuration ConfigMap's data: config.yaml and the extra files. */}}
{{- define "acd.configData" -}}
config.yaml: |
  {{- include "acd.config" . | nindent 2 }}
{{- range $name, $content := .Values.files }}
{{ $name }}: |
  {{- $content | nindent 2 }}
{{- end }}
{{- end }}
