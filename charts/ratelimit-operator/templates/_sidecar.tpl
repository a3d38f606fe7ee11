{{/* config/sidecar in one namespace: the sidecars' ServiceAccount and the Role letting it
get/list/watch that namespace's ratelimit-snapshot ConfigMap (and nothing else). The names are
fixed: sidecar pods and config/service refer to ratelimit-sidecar. Called with (dict "root" $
"namespace" NS). */}}
{{- define "ratelimit-operator.sidecarRBAC" -}}
{{- $root := .root }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: ratelimit-sidecar
  namespace: {{ .namespace }}
  labels:
    {{- include "ratelimit-operator.labels" $root | nindent 4 }}
    app.kubernetes.io/component: sidecar
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: ratelimit-sidecar
  namespace: {{ .namespace }}
  labels:
    {{- include "ratelimit-operator.labels" $root | nindent 4 }}
    app.kubernetes.io/component: sidecar
rules:
- apiGroups:
  - ""
  resources:
  - configmaps
  resourceNames:
  - ratelimit-snapshot
  verbs:
  - get
  - list
  - watch
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: ratelimit-sidecar
  namespace: {{ .namespace }}
  labels:
    {{- include "ratelimit-operator.labels" $root | nindent 4 }}
    app.kubernetes.io/component: sidecar
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: ratelimit-sidecar
subjects:
- kind: ServiceAccount
  name: ratelimit-sidecar
  namespace: {{ .namespace }}
{{- end }}
