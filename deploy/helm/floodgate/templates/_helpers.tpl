{{/* The chart's name, or nameOverride. */}}
{{- define "floodgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* <release>-<name>, or the release name when it already contains the name. */}}
{{- define "floodgate.fullname" -}}
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

{{- define "floodgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "floodgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "floodgate.labels" -}}
{{ include "floodgate.selectorLabels" . }}
app.kubernetes.io/component: rate-limit-service
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "floodgate.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "floodgate.rulesConfigMap" -}}
{{- default (printf "%s-rules" (include "floodgate.fullname" .)) .Values.rules.existingConfigMap }}
{{- end }}

{{/* The pods that run at least: the HPA's floor, or replicaCount. */}}
{{- define "floodgate.minPods" -}}
{{- if .Values.autoscaling.enabled }}{{ .Values.autoscaling.minReplicas }}{{ else }}{{ .Values.replicaCount }}{{ end }}
{{- end }}

{{/* Refuses value combinations that would deploy something broken, with the reason. */}}
{{- define "floodgate.validate" -}}
{{- if and (not .Values.redis.enabled) (or .Values.autoscaling.enabled (gt (int .Values.replicaCount) 1)) }}
{{- fail "redis.enabled=false (the memory backend) counts per pod: with more than one pod a limit of N lets N through per pod. Set redis.url, or run one pod (replicaCount: 1, autoscaling.enabled: false, podDisruptionBudget.enabled: false)" }}
{{- end }}
{{- if and .Values.redis.enabled (not .Values.redis.url) (not .Values.redis.urlSecret.name) }}
{{- fail "redis.url (or redis.urlSecret) is required with redis.enabled" }}
{{- end }}
{{- if and .Values.redis.sentinelAuth.existingSecret (ne .Values.redis.type "SENTINEL") }}
{{- fail "redis.sentinelAuth is for redis.type SENTINEL" }}
{{- end }}
{{- if and .Values.redis.tls.enabled (not .Values.redis.tls.existingSecret) .Values.redis.tls.clientCertificate }}
{{- fail "redis.tls.clientCertificate needs redis.tls.existingSecret (tls.crt, tls.key)" }}
{{- end }}
{{- if and (eq .Values.rules.source "xds") (not .Values.rules.xds.serverUrl) }}
{{- fail "rules.source=xds needs rules.xds.serverUrl (host:port of the xDS management server)" }}
{{- end }}
{{- if and (eq .Values.rules.source "xds") (or .Values.rules.files .Values.rules.existingConfigMap) }}
{{- fail "rules.source=xds reads no rule files: drop rules.files and rules.existingConfigMap" }}
{{- end }}
{{- if and .Values.rules.allowNone (or .Values.rules.files .Values.rules.existingConfigMap (eq .Values.rules.source "xds")) }}
{{- fail "rules.allowNone=true is for running with no rules at all: drop it, or drop rules.files / rules.existingConfigMap / rules.source=xds" }}
{{- end }}
{{- if and .Values.rules.files .Values.rules.existingConfigMap }}
{{- fail "rules.files and rules.existingConfigMap: set one of them" }}
{{- end }}
{{- if and .Values.rules.xds.tls.enabled (not .Values.rules.xds.tls.existingSecret) }}
{{- fail "rules.xds.tls.enabled needs rules.xds.tls.existingSecret (ca.crt; tls.crt and tls.key with clientCertificate)" }}
{{- end }}
{{- if and .Values.grpcTls.enabled (not .Values.grpcTls.existingSecret) }}
{{- fail "grpcTls.enabled needs grpcTls.existingSecret (tls.crt, tls.key; ca.crt with requireClientCertificate)" }}
{{- end }}
{{- if le (mul (int .Values.terminationGracePeriodSeconds) 1000) (add (int .Values.shutdownGraceMs) 5000) }}
{{- fail (printf "terminationGracePeriodSeconds (%v s) must exceed shutdownGraceMs (%v ms) + 5 s, or the kubelet kills pods that are still draining" .Values.terminationGracePeriodSeconds .Values.shutdownGraceMs) }}
{{- end }}
{{- if and .Values.podDisruptionBudget.enabled (le (int (include "floodgate.minPods" .)) (int .Values.podDisruptionBudget.minAvailable)) }}
{{- fail (printf "podDisruptionBudget.minAvailable (%v) must be below the pod count (%v), or no node can ever be drained" .Values.podDisruptionBudget.minAvailable (include "floodgate.minPods" .)) }}
{{- end }}
{{- if .Values.networkPolicy.enabled }}
{{- range $list := list "gateways" "prometheus" }}
{{- range $i, $peer := index $.Values.networkPolicy $list }}
{{- if hasKey $peer "namespaceSelector" }}
{{- if not (include "floodgate.namesNamespaces" $peer.namespaceSelector) }}
{{- fail (printf "networkPolicy.%s[%d].namespaceSelector: select namespaces by kubernetes.io/metadata.name only (matchLabels, or matchExpressions with operator In): any other namespace label can be set by whoever may label a namespace, and {} admits every namespace" $list $i) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- range $name, $_ := .Values.env }}
{{- if has $name (list "REDIS_URL" "REDIS_TYPE" "REDIS_AUTH" "REDIS_SENTINEL_AUTH" "REDIS_TLS" "REDIS_TLS_CACERT" "REDIS_TLS_CLIENT_CERT" "REDIS_TLS_CLIENT_KEY" "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION" "BACKEND_TYPE" "BACKEND_FAILURE_MODE" "CONFIG_TYPE" "CONFIG_GRPC_XDS_SERVER_URL" "CONFIG_GRPC_XDS_NODE_ID" "RUNTIME_ROOT" "RUNTIME_SUBDIRECTORY" "RUNTIME_APPDIRECTORY" "RUNTIME_WATCH_ROOT" "PORT" "GRPC_PORT" "HOST" "GRPC_HOST" "DEBUG_HOST" "USE_PROMETHEUS" "PROMETHEUS_ADDR" "PROMETHEUS_PATH" "SHUTDOWN_GRACE_MS" "ORPHAN_SCAN_INTERVAL" "ORPHAN_SCAN_REPLICAS" "GRPC_SERVER_USE_TLS" "GRPC_SERVER_TLS_CERT" "GRPC_SERVER_TLS_KEY" "GRPC_CLIENT_TLS_CACERT" "LOG_LEVEL" "LOG_FORMAT" "LIMIT_RESPONSE_HEADERS_ENABLED") }}
{{- fail (printf "env.%s: the chart sets %s from its own values; set it there" $name $name) }}
{{- end }}
{{- end }}
{{- end }}

{{/* Non-empty when a namespaceSelector names its namespaces by kubernetes.io/metadata.name and nothing else. */}}
{{- define "floodgate.namesNamespaces" -}}
{{- $labels := get . "matchLabels" | default dict }}
{{- $expressions := get . "matchExpressions" | default list }}
{{- if and (eq (len $labels) 1) (eq (len $expressions) 0) (hasKey $labels "kubernetes.io/metadata.name") }}yes
{{- else if and (eq (len $labels) 0) (eq (len $expressions) 1) }}
{{- $e := first $expressions }}
{{- if and (eq (get $e "key") "kubernetes.io/metadata.name") (eq (get $e "operator") "In") }}yes{{ end }}
{{- end }}
{{- end }}
