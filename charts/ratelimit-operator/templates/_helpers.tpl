{{/* The chart name, overridable. */}}
{{- define "ratelimit-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every object name: <release>-<chart>, or the release name when it already
holds the chart name. Trimmed so the longest suffix the chart adds still fits 63. */}}
{{- define "ratelimit-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "ratelimit-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. app.kubernetes.io/name is the one config/ uses too. */}}
{{- define "ratelimit-operator.labels" -}}
helm.sh/chart: {{ include "ratelimit-operator.chart" . }}
app.kubernetes.io/name: {{ include "ratelimit-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The manager pods' labels, selected by its Deployment and Services. */}}
{{- define "ratelimit-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ratelimit-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
control-plane: controller-manager
{{- end }}

{{- define "ratelimit-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ratelimit-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "ratelimit-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "ratelimit-operator.webhookService" -}}
{{- printf "%s-webhook" (include "ratelimit-operator.fullname" .) }}
{{- end }}

{{- define "ratelimit-operator.webhookSecret" -}}
{{- printf "%s-webhook-server-cert" (include "ratelimit-operator.fullname" .) }}
{{- end }}

{{/* The Secret of the usage API's serving certificate: usageApi.certSecret, else the one the
chart makes for the APIService (usage-apiservice.yaml), else none (a self-signed pair in
memory). */}}
{{- define "ratelimit-operator.usageSecret" -}}
{{- if .Values.usageApi.certSecret }}{{ .Values.usageApi.certSecret }}
{{- else if .Values.usageApi.apiService.enabled }}{{ printf "%s-usage-tls" (include "ratelimit-operator.fullname" .) }}
{{- end }}
{{- end }}

{{- define "ratelimit-operator.servingCert" -}}
{{- printf "%s-serving-cert" (include "ratelimit-operator.fullname" .) }}
{{- end }}

{{/* The manager's arguments as a YAML list, one flag per value. A flag whose value is empty
is left out so the binary's default applies. */}}
{{- define "ratelimit-operator.args" -}}
{{- $v := .Values -}}
{{- $a := list -}}
{{- $a = append $a (printf "--metrics-bind-address=%s" (ternary (printf ":%v" $v.metrics.port) "0" $v.metrics.enabled)) -}}
{{- if not $v.metrics.secure }}{{ $a = append $a "--metrics-secure=false" }}{{ end -}}
{{- $a = append $a (printf "--health-probe-bind-address=:%v" $v.healthProbe.port) -}}
{{- $a = append $a (printf "--usage-bind-address=%s" (ternary (printf ":%v" $v.usageApi.port) "0" $v.usageApi.enabled)) -}}
{{- if and $v.usageApi.enabled (include "ratelimit-operator.usageSecret" .) }}{{ $a = append $a "--usage-cert-dir=/var/run/secrets/ratelimit/usage-tls" }}{{ end -}}
{{- if and $v.usageApi.enabled $v.usageApi.apiService.enabled }}{{ $a = append $a "--usage-front-proxy" }}{{ end -}}
{{- if and $v.usageApi.enabled $v.usageApi.redisTimeout }}{{ $a = append $a (printf "--usage-redis-timeout=%s" $v.usageApi.redisTimeout) }}{{ end -}}
{{- if $v.leaderElection.enabled }}{{ $a = append $a "--leader-elect" }}{{ end -}}
{{- with $v.leaderElection.namespace }}{{ $a = append $a (printf "--leader-election-namespace=%s" .) }}{{ end -}}
{{- with $v.leaderElection.leaseDuration }}{{ $a = append $a (printf "--leader-elect-lease-duration=%s" .) }}{{ end -}}
{{- with $v.leaderElection.renewDeadline }}{{ $a = append $a (printf "--leader-elect-renew-deadline=%s" .) }}{{ end -}}
{{- if $v.enableHTTP2 }}{{ $a = append $a "--enable-http2" }}{{ end -}}
{{- if $v.webhook.enabled -}}
{{- with $v.webhook.host }}{{ $a = append $a (printf "--webhook-host=%s" .) }}{{ end -}}
{{- $a = append $a (printf "--webhook-port=%v" $v.webhook.port) -}}
{{- $a = append $a (printf "--webhook-cert-dir=%s" $v.webhook.certDir) -}}
{{- if $v.sidecarInjection.enabled }}{{ $a = concat $a (include "ratelimit-operator.injectionArgs" . | fromYamlArray) }}{{ end -}}
{{- else -}}
{{- if $v.sidecarInjection.enabled }}{{ fail "sidecarInjection.enabled needs webhook.enabled: the injection webhook is served by the webhook server" }}{{ end -}}
{{- $a = append $a "--webhooks=false" -}}
{{- end -}}
{{- $a = append $a (printf "--redis-mode=%s" $v.redis.mode) -}}
{{- $a = append $a (printf "--redis-addrs=%s" (join "," $v.redis.addrs)) -}}
{{- with $v.redis.masterName }}{{ $a = append $a (printf "--redis-master-name=%s" .) }}{{ end -}}
{{- with $v.redis.db }}{{ $a = append $a (printf "--redis-db=%v" .) }}{{ end -}}
{{- with $v.redis.keyPrefix }}{{ $a = append $a (printf "--key-prefix=%s" .) }}{{ end -}}
{{- with $v.redis.scriptResync }}{{ $a = append $a (printf "--script-resync=%s" .) }}{{ end -}}
{{- if $v.redis.credentials.enabled }}{{ $a = append $a "--redis-credentials-path=/var/run/secrets/ratelimit/redis" }}{{ end -}}
{{- if $v.redis.tls.enabled }}{{ $a = append $a "--redis-tls" }}{{ end -}}
{{- with $v.redis.tls.caPath }}{{ $a = append $a (printf "--redis-tls-ca-path=%s" .) }}{{ end -}}
{{- with $v.redis.tls.serverName }}{{ $a = append $a (printf "--redis-tls-server-name=%s" .) }}{{ end -}}
{{- with $v.redis.tls.certPath }}{{ $a = append $a (printf "--redis-tls-cert-path=%s" .) }}{{ end -}}
{{- with $v.redis.tls.keyPath }}{{ $a = append $a (printf "--redis-tls-key-path=%s" .) }}{{ end -}}
{{- if $v.redis.tenantUsers.enabled }}{{ $a = append $a "--redis-tenant-users" }}{{ end -}}
{{- with $v.redis.tenantUsers.secretName }}{{ $a = append $a (printf "--redis-tenant-secret-name=%s" .) }}{{ end -}}
{{- with $v.redis.tenantUsers.userPrefix }}{{ $a = append $a (printf "--redis-tenant-user-prefix=%s" .) }}{{ end -}}
{{- with $v.redis.tenantUsers.rotationPeriod }}{{ $a = append $a (printf "--redis-tenant-rotation-period=%s" .) }}{{ end -}}
{{- with $v.redis.tenantUsers.passwordGrace }}{{ $a = append $a (printf "--redis-tenant-password-grace=%s" .) }}{{ end -}}
{{- if $v.redis.tenantUsers.allowEvalSHA }}{{ $a = append $a "--redis-tenant-allow-evalsha" }}{{ end -}}
{{- if not $v.redis.backends.enabled }}{{ $a = append $a "--redis-backends=false" }}{{ end -}}
{{- with $v.redis.memory.checkInterval }}{{ $a = append $a (printf "--redis-memory-check-interval=%s" .) }}{{ end -}}
{{- if not (kindIs "invalid" $v.redis.memory.scanKeysPerSecond) }}{{ $a = append $a (printf "--redis-memory-scan-keys-per-second=%v" (int64 $v.redis.memory.scanKeysPerSecond)) }}{{ end -}}
{{- with $v.gatewayAPI.implementations }}{{ $a = append $a (printf "--gateway-implementations=%s" .) }}{{ end -}}
{{- with $v.gatewayAPI.extAuthService }}{{ $a = append $a (printf "--gateway-extauthz-service=%s" .) }}{{ end -}}
{{- with $v.gatewayAPI.extAuthPort }}{{ $a = append $a (printf "--gateway-extauthz-port=%v" .) }}{{ end -}}
{{- with $v.gatewayAPI.istioProvider }}{{ $a = append $a (printf "--istio-extauthz-provider=%s" .) }}{{ end -}}
{{- if $v.logging.development }}{{ $a = append $a "--zap-devel" }}{{ end -}}
{{- with $v.logging.encoder }}{{ $a = append $a (printf "--zap-encoder=%s" .) }}{{ end -}}
{{- with $v.logging.level }}{{ $a = append $a (printf "--zap-log-level=%s" .) }}{{ end -}}
{{- with $v.logging.stacktraceLevel }}{{ $a = append $a (printf "--zap-stacktrace-level=%s" .) }}{{ end -}}
{{- with $v.logging.timeEncoding }}{{ $a = append $a (printf "--zap-time-encoding=%s" .) }}{{ end -}}
{{- toYaml $a }}
{{- end }}
