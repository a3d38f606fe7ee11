{{- /*
Helpers for type.tpl. Validation is rendered from the kubebuilder markers themselves (not from
crd-ref-docs' pre-formatted strings) so that bounds print as integers, list semantics
(+listType, +listMapKey) show, and CEL rules keep their messages.
*/ -}}

{{- /* doc: a Go doc comment as Markdown paragraphs, with the characters Markdown would eat escaped. */ -}}
{{- define "doc" -}}
{{- range $i, $p := splitList "\n\n" (trim .) -}}
{{- if $i }}

{{ end -}}
{{- $p | replace "\\" "\\\\" | replace "*" "\\*" | replace "<" "\\<" | replace ">" "\\>" | replace "\n" " " -}}
{{- end -}}
{{- end -}}

{{- /* cell: like doc, for a table cell: paragraphs joined by <br><br>, pipes escaped. */ -}}
{{- define "cell" -}}
{{- range $i, $p := splitList "\n\n" (trim .) -}}
{{- if $i }}<br><br>{{ end -}}
{{- $p | replace "\\" "\\\\" | replace "*" "\\*" | replace "<" "\\<" | replace ">" "\\>" | replace "|" "\\|" | replace "\n" " " -}}
{{- end -}}
{{- end -}}

{{- /*
enumDoc: dict value, doc. A constant's doc comment starts with the constant's name
("AlgorithmGCRA is the generic ..."); the table already names the value, so that is dropped.
*/ -}}
{{- define "enumDoc" -}}
{{- $d := regexReplaceAll (printf "^[A-Za-z0-9_]*%s (is )?" (regexQuoteMeta .value)) (trim .doc) "" -}}
{{- if $d }}{{ template "cell" (printf "%s%s" (upper (substr 0 1 $d)) (substr 1 -1 $d)) }}{{ end -}}
{{- end -}}

{{- /* code: a code span inside a table cell. */ -}}
{{- define "code" -}}
`{{ toString . | replace "|" "\\|" }}`
{{- end -}}

{{- /* fieldType: the field's type; a +kubebuilder:validation:Type override wins (metav1.Duration is a string). */ -}}
{{- define "fieldType" -}}
{{- with index .Markers "kubebuilder:validation:Type" -}}
{{ last . }} ({{ untitle $.Type.Name }})
{{- else -}}
{{ markdownRenderType .Type }}
{{- end -}}
{{- end -}}

{{- /*
required: No for a field marked +optional, Yes otherwise. controller-gen also makes an
unmarked omitempty field optional, which the templates cannot see (crd-ref-docs drops the json
tag options); docs_test.go checks the column against the generated CRD.
*/ -}}
{{- define "required" -}}
{{- if or (index .Markers "optional") (index .Markers "kubebuilder:validation:Optional") (index .Markers "k8s:optional") -}}
No
{{- else -}}
Yes
{{- end -}}
{{- end -}}

{{- /*
fieldValidation: the field's own markers. crd-ref-docs copies the markers of a field's named or
pointed-to type onto the field; those are shown in the type's own section, so they are dropped
here unless the field sets a different value.
*/ -}}
{{- define "fieldValidation" -}}
{{- $f := . -}}
{{- $own := dict -}}
{{- range $name, $vals := $f.Markers -}}
{{- if ne (toJson $vals) (toJson (index $f.Type.Markers $name)) -}}
{{- $_ := set $own $name $vals -}}
{{- end -}}
{{- end -}}
{{- template "validation" (dict "m" $own "skip" list "prefix" "") -}}
{{- end -}}

{{- /*
validation: dict m (markers), skip (marker names to leave out), prefix (printed before a
non-empty result). Known markers print in a fixed order; any other kubebuilder:validation
marker prints as name and value, so none is dropped silently.
*/ -}}
{{- define "validation" -}}
{{- $m := .m -}}
{{- $skip := .skip -}}
{{- $out := list -}}
{{- $items := list -}}
{{- $rules := list -}}
{{- $known := list "Enum" "Minimum" "ExclusiveMinimum" "Maximum" "ExclusiveMaximum" "MultipleOf" "MinLength" "MaxLength" "Pattern" "Format" "MinItems" "MaxItems" "UniqueItems" "MinProperties" "MaxProperties" -}}
{{- $quiet := list "Type" "Required" "Optional" "XValidation" -}}
{{- range $i, $prefix := list "kubebuilder:validation:" "kubebuilder:validation:items:" -}}
{{- $acc := list -}}
{{- range $name := $known -}}
{{- $key := printf "%s%s" $prefix $name -}}
{{- if not (has $key $skip) -}}
{{- with index $m $key -}}
{{- $v := last . -}}
{{- if eq $name "Enum" -}}
{{- $vals := list -}}
{{- range $v }}{{ $vals = append $vals (printf "`%v`" . | replace "|" "\\|") }}{{ end -}}
{{- $acc = append $acc (printf "one of %s" (join ", " $vals)) -}}
{{- else if or (eq $name "Pattern") (eq $name "Format") -}}
{{- $acc = append $acc (printf "%s `%s`" (untitle $name) (toString $v | replace "|" "\\|")) -}}
{{- else if eq $name "UniqueItems" -}}
{{- if $v }}{{ $acc = append $acc "unique items" }}{{ end -}}
{{- else -}}
{{- $acc = append $acc (printf "%s %s" (untitle $name) (toJson $v)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* Markers this template does not know print as name and JSON value. */ -}}
{{- range $key, $vals := $m -}}
{{- $name := trimPrefix $prefix $key -}}
{{- if and (hasPrefix $prefix $key) (not (contains ":" $name)) (not (has $name $known)) (not (has $name $quiet)) (not (has $key $skip)) -}}
{{- $acc = append $acc (printf "%s %s" $name (toJson (last $vals))) -}}
{{- end -}}
{{- end -}}
{{- if $i }}{{ $items = $acc }}{{ else }}{{ $out = $acc }}{{ end -}}
{{- end -}}
{{- with index $m "listType" -}}
{{- $lt := toString (last .) -}}
{{- if eq $lt "set" }}{{ $out = append $out "unique items" }}{{ end -}}
{{- if eq $lt "map" -}}
{{- $keys := list -}}
{{- range index $m "listMapKey" }}{{ $keys = append $keys (printf "`%s`" (toString .)) }}{{ end -}}
{{- $out = append $out (printf "unique by %s" (join " and " $keys)) -}}
{{- end -}}
{{- end -}}
{{- range index $m "kubebuilder:validation:XValidation" -}}
{{- $rule := printf "rule `%s`" (.Rule | replace "|" "\\|") -}}
{{- with .Message }}{{ $rule = printf "%s: %s" $rule (. | replace "|" "\\|") }}{{ end -}}
{{- $rules = append $rules $rule -}}
{{- end -}}
{{- $parts := list -}}
{{- if $out }}{{ $parts = append $parts (join ", " $out) }}{{ end -}}
{{- if $items }}{{ $parts = append $parts (printf "each item: %s" (join ", " $items)) }}{{ end -}}
{{- if $rules }}{{ $parts = append $parts (join "; " $rules) }}{{ end -}}
{{- if $parts }}{{ .prefix }}{{ join "; " $parts }}{{ end -}}
{{- end -}}
