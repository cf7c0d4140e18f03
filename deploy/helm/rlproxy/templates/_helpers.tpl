{{/* The name of every object: the release name, or release-chart. */}}
{{- define "rlproxy.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels selecting this release's pods. */}}
{{- define "rlproxy.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "rlproxy.labels" -}}
{{ include "rlproxy.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The demo configuration, used only when .Values.config is empty: one
instance's memory store, the built-in echo upstream, no secrets. */}}
{{- define "rlproxy.demoConfig" -}}
listen: ":8080"
admin_listen: ":9090"
store:
  type: memory
upstreams:
  app: { builtin: echo }
policies:
  api: { algorithm: token_bucket, rate: 30r/m, burst: 5, key: ip }
routes:
  - name: api
    match: { path_prefix: /api/ }
    upstream: app
    policies: [api]
  - name: rest
    match: { path_prefix: / }
    upstream: app
{{- end -}}

{{/* The configuration file's text: .Values.config as given (a string is
the file itself), or the demo when it is empty. Never a merge of the two. */}}
{{- define "rlproxy.configText" -}}
{{- $c := .Values.config -}}
{{- if kindIs "string" $c -}}
{{- $c -}}
{{- else if $c -}}
{{- toYaml $c -}}
{{- else -}}
{{- include "rlproxy.demoConfig" . -}}
{{- end -}}
{{- end -}}

{{/* The environment variables the configuration names in its *_env fields,
one a line, sorted, each once. */}}
{{- define "rlproxy.secretEnvNames" -}}
{{- $c := include "rlproxy.configText" . | fromYaml -}}
{{- if hasKey $c "Error" -}}
{{- fail (printf "config: not YAML: %s" (get $c "Error")) -}}
{{- end -}}
{{- $names := list -}}
{{- with $c.store -}}
{{- with .key_hash_secret_env }}{{ $names = append $names . }}{{ end -}}
{{- with .valkey }}{{ with .password_env }}{{ $names = append $names . }}{{ end }}{{ end -}}
{{- end -}}
{{- with $c.jwt }}{{ with .hmac_secret_env }}{{ $names = append $names . }}{{ end }}{{ end -}}
{{- with $c.admin }}{{ with .basic_auth }}{{ with .password_env }}{{ $names = append $names . }}{{ end }}{{ end }}{{ end -}}
{{- range $u := ($c.upstreams | default dict) -}}
{{- range $edit := list "request_headers" "response_headers" -}}
{{- with (get ($u | default dict) $edit) }}{{ range $h, $v := (.set_env | default dict) }}{{ $names = append $names $v }}{{ end }}{{ end -}}
{{- end -}}
{{- end -}}
{{- $names | uniq | sortAlpha | join "\n" -}}
{{- end -}}
