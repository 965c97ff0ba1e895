{{- define "gpuscope.labels" -}}
app.kubernetes.io/name: gpuscope
app.kubernetes.io/component: exporter
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}
{{- define "gpuscope.selector" -}}
app.kubernetes.io/name: gpuscope
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}
{{- /*
A Secret volume's files belong to root (fsGroup can only add a group,
and gpuscope refuses a secret that its group may read), so a user other
than root cannot read the token or the key: say so at install time
rather than in a crash-looping pod.
*/ -}}
{{- define "gpuscope.checks" -}}
{{- if and .Values.unprivileged .Values.tokenSecret.name }}
{{- fail "tokenSecret needs unprivileged: false: a Secret's files are root's, and gpuscope reads a secret only when no group or other user may" }}
{{- end }}
{{- if and .Values.unprivileged .Values.tls.secretName }}
{{- fail "tls needs unprivileged: false: a Secret's files are root's, and gpuscope reads a private key only when no group or other user may" }}
{{- end }}
{{- end }}
{{- define "gpuscope.scheme" -}}
{{- if .Values.tls.secretName }}HTTPS{{ else }}HTTP{{ end }}
{{- end }}
