{{/* The sidecar injection webhook for Pods (internal/webhook/podinject), written here rather
than generated: its selectors cannot be kubebuilder markers. Two entries, both failurePolicy
Fail: Pods of an opted-in namespace that do not opt out, and Pods that opt in themselves in any
other namespace. Pods matching neither are never sent to the webhook, so never blocked by it.
kube-system, the release namespace and sidecarInjection.excludeNamespaces are never matched.
Called from webhook.yaml with (dict "root" $ "caBundle" CA), so it shares the Service and the
certificate (self-signed or cert-manager) of the policy webhooks. */}}
{{- define "ratelimit-operator.injectionWebhook" -}}
{{- $root := .root }}
{{- $v := $root.Values.sidecarInjection }}
{{- $cm := $root.Values.webhook.certManager }}
{{- $excluded := concat (list "kube-system" $root.Release.Namespace) $v.excludeNamespaces | uniq }}
{{- $client := dict "service" (dict "name" (include "ratelimit-operator.webhookService" $root) "namespace" $root.Release.Namespace "path" "/inject-v1-pod" "port" 443) }}
{{- if not $cm.enabled }}
{{- $_ := set $client "caBundle" .caBundle }}
{{- end }}
{{- $common := dict "admissionReviewVersions" (list "v1") "clientConfig" $client "failurePolicy" "Fail" "matchPolicy" "Equivalent" "reinvocationPolicy" "Never" "sideEffects" "None" "timeoutSeconds" (int $v.timeoutSeconds) "rules" (list (dict "apiGroups" (list "") "apiVersions" (list "v1") "operations" (list "CREATE") "resources" (list "pods") "scope" "Namespaced")) }}
{{- $notExcluded := dict "key" "kubernetes.io/metadata.name" "operator" "NotIn" "values" $excluded }}
{{- $byNamespace := merge (dict "name" "namespace.inject.ratelimit.dev" "namespaceSelector" (dict "matchExpressions" (list (dict "key" "ratelimit.dev/inject" "operator" "In" "values" (list "enabled")) $notExcluded)) "objectSelector" (dict "matchExpressions" (list (dict "key" "ratelimit.dev/inject" "operator" "NotIn" "values" (list "disabled"))))) (deepCopy $common) }}
{{- $byPod := merge (dict "name" "pod.inject.ratelimit.dev" "namespaceSelector" (dict "matchExpressions" (list (dict "key" "ratelimit.dev/inject" "operator" "NotIn" "values" (list "enabled")) $notExcluded)) "objectSelector" (dict "matchExpressions" (list (dict "key" "ratelimit.dev/inject" "operator" "In" "values" (list "enabled"))))) (deepCopy $common) }}
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: {{ include "ratelimit-operator.fullname" $root }}-sidecar-injection
  labels:
    {{- include "ratelimit-operator.labels" $root | nindent 4 }}
    app.kubernetes.io/component: sidecar-injection
  annotations:
    {{- /* The image the webhook injects now: `kubectl ratelimit sidecars` compares each
    injected Pod's sidecar with it. */}}
    ratelimit.dev/sidecar-image: {{ default (include "ratelimit-operator.image" $root) $v.image | quote }}
    {{- if $cm.enabled }}
    cert-manager.io/inject-ca-from: {{ $root.Release.Namespace }}/{{ include "ratelimit-operator.servingCert" $root }}
    {{- end }}
webhooks:
{{- toYaml (list $byNamespace $byPod) | nindent 0 }}
{{- end }}

{{/* The manager's sidecar injection flags, as a list (appended to ratelimit-operator.args). */}}
{{- define "ratelimit-operator.injectionArgs" -}}
{{- $root := . }}
{{- $v := .Values.sidecarInjection }}
{{- $a := list "--sidecar-injection" }}
{{- $a = append $a (printf "--sidecar-image=%s" (default (include "ratelimit-operator.image" $root) $v.image)) }}
{{- $a = append $a (printf "--sidecar-image-pull-policy=%s" (default .Values.image.pullPolicy $v.pullPolicy)) }}
{{- $a = append $a (printf "--sidecar-cpu-request=%v" $v.resources.requests.cpu) }}
{{- $a = append $a (printf "--sidecar-memory-request=%v" $v.resources.requests.memory) }}
{{- $a = append $a (printf "--sidecar-cpu-limit=%v" $v.resources.limits.cpu) }}
{{- $a = append $a (printf "--sidecar-memory-limit=%v" $v.resources.limits.memory) }}
{{- $a = append $a (printf "--sidecar-max-cpu=%v" $v.maxCpu) }}
{{- $a = append $a (printf "--sidecar-max-memory=%v" $v.maxMemory) }}
{{- $a = append $a (printf "--sidecar-proxy-port=%v" (int $v.ports.proxy)) }}
{{- $a = append $a (printf "--sidecar-metrics-port=%v" (int $v.ports.metrics)) }}
{{- $a = append $a (printf "--sidecar-grpc-port=%v" (int $v.ports.grpc)) }}
{{- $a = append $a (printf "--sidecar-check-port=%v" (int $v.ports.check)) }}
{{- if $v.redisCredentials }}{{ $a = append $a "--sidecar-redis-credentials" }}{{ end }}
{{- toYaml $a }}
{{- end }}
