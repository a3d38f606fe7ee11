{{- /* One section per type: its doc, resource facts, references, CEL rules, fields or values. */ -}}
{{- define "type" -}}
{{- $type := . }}
## {{ $type.Name }}
{{- with $type.Doc }}

{{ template "doc" . }}
{{- end }}
{{- if $type.GVK }}
{{- $res := last (index $type.Markers "kubebuilder:resource") }}
{{- if $res }}

Scope: {{ default "Namespaced" $res.Scope }}.
{{- with $res.ShortName }} Short names: {{ range $i, $n := . }}{{ if $i }}, {{ end }}`{{ $n }}`{{ end }}.{{ end }}
{{- with $res.Categories }} Categories: {{ range $i, $n := . }}{{ if $i }}, {{ end }}`{{ $n }}`{{ end }}.{{ end }}
{{- end }}
{{- end }}
{{- with $type.SortedReferences }}

Appears in: {{ range $i, $r := . }}{{ if $i }}, {{ end }}{{ markdownRenderTypeLink $r }}{{ end }}
{{- end }}
{{- with index $type.Markers "kubebuilder:validation:XValidation" }}

Rules (CEL `x-kubernetes-validations`, enforced by the API server):

| Rule | Message | Reported at |
| --- | --- | --- |
{{- range . }}
| {{ template "code" .Rule }} | {{ template "cell" (default .MessageExpression .Message) }} | {{ with .FieldPath }}{{ template "code" . }}{{ end }} |
{{- end }}
{{- end }}
{{- if $type.IsAlias }}

Type: `{{ markdownRenderType $type.UnderlyingType }}`
{{- if $type.EnumValues }}, one of:

| Value | Description |
| --- | --- |
{{- range $type.EnumValues }}
| `{{ .Name }}` | {{ template "enumDoc" (dict "value" .Name "doc" .Doc) }} |
{{- end }}
{{- else }}
{{- with index $type.Markers "kubebuilder:validation:Enum" }}, one of {{ range $i, $v := last . }}{{ if $i }}, {{ end }}`{{ $v }}`{{ end }}{{ end }}.
{{- end }}
{{- template "validation" (dict "m" $type.Markers "skip" (list "kubebuilder:validation:Enum") "prefix" "\n\nValidation: ") }}
{{- end }}
{{- if $type.Members }}

| Field | Type | Required | Default | Validation | Description |
| --- | --- | --- | --- | --- | --- |
{{- if $type.GVK }}
| `apiVersion` | string | Yes |  |  | `{{ $type.GVK.Group }}/{{ $type.GVK.Version }}` |
| `kind` | string | Yes |  |  | `{{ $type.GVK.Kind }}` |
{{- end }}
{{- range $type.Members }}
| `{{ .Name }}` | {{ template "fieldType" . }} | {{ template "required" . }} | {{ with .Default }}{{ template "code" . }}{{ end }} | {{ template "fieldValidation" . }} | {{ template "cell" .Doc }} |
{{- end }}
{{- end }}
{{- end -}}
