{{- define "gpuscope.labels" -}}
app.kubernetes.io/name: gpuscope
app.kubernetes.io/component: exporter
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}
{{- define "gpuscope.selector" -}}
app.kubernetes.io/name: gpuscope
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}
