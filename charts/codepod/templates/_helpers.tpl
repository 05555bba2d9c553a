{{/* Names and labels shared by the templates. */}}
{{- define "codepod.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "codepod.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "codepod.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "codepod.selectorLabels" -}}
app.kubernetes.io/name: {{ include "codepod.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "codepod.labels" -}}
helm.sh/chart: {{ include "codepod.chart" . }}
{{ include "codepod.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: codepod
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Labels of objects that are not the controller (no component). */}}
{{- define "codepod.commonLabels" -}}
helm.sh/chart: {{ include "codepod.chart" . }}
app.kubernetes.io/name: {{ include "codepod.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: codepod
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "codepod.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "codepod.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "codepod.sandboxNamespace" -}}
{{- default .Release.Namespace .Values.sandbox.namespace -}}
{{- end -}}

{{- define "codepod.tokenSecret" -}}
{{- default (printf "%s-token" (include "codepod.fullname" .)) .Values.api.existingSecret -}}
{{- end -}}

{{- define "codepod.terminationGrace" -}}
{{- $grace := int .Values.terminationGracePeriodSeconds -}}
{{- if eq $grace 0 -}}
{{- $grace = add (int .Values.server.drainSeconds) 15 -}}
{{- end -}}
{{- if le (int $grace) (int .Values.server.drainSeconds) -}}
{{- fail "terminationGracePeriodSeconds must be longer than server.drainSeconds" -}}
{{- end -}}
{{- $grace -}}
{{- end -}}

{{/*
The sandbox pod template: files/sandbox-pod.yaml (the one copy, also used by
the tests) with the values applied. Only the fields named by values change.
*/}}
{{- define "codepod.sandboxPod" -}}
{{- $pod := .Files.Get "files/sandbox-pod.yaml" | fromYaml -}}
{{- $sb := .Values.sandbox -}}
{{- $meta := $pod.metadata -}}
{{- $labels := merge (dict "app.kubernetes.io/instance" .Release.Name "app.kubernetes.io/part-of" "codepod") (default dict $meta.labels) -}}
{{- $labels = merge (deepCopy $sb.podLabels) $labels -}}
{{- range $k, $v := $labels -}}
{{- if or (hasPrefix "codepod.dev/" $k) (eq $k "app.kubernetes.io/managed-by") -}}
{{- fail (printf "sandbox.podLabels: %s is codepod's own label" $k) -}}
{{- end -}}
{{- end -}}
{{- $_ := set $meta "labels" $labels -}}
{{- if $sb.podAnnotations -}}
{{- $_ := set $meta "annotations" (merge (deepCopy $sb.podAnnotations) (default dict $meta.annotations)) -}}
{{- end -}}
{{- $spec := $pod.spec -}}
{{- $_ := set $spec "activeDeadlineSeconds" (int $sb.maxAgeSeconds) -}}
{{- range $spec.containers -}}
{{- if eq .name "node" -}}
{{- $_ := set . "image" (printf "%s:%s" $sb.image.repository $sb.image.tag) -}}
{{- $_ := set . "imagePullPolicy" $sb.image.pullPolicy -}}
{{- if $sb.resources -}}
{{- $_ := set . "resources" $sb.resources -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $spec.volumes -}}
{{- if and (eq .name "workspace") .emptyDir -}}
{{- $_ := set .emptyDir "sizeLimit" $sb.workspaceSizeLimit -}}
{{- end -}}
{{- end -}}
{{- $nodeSelector := merge (deepCopy (default dict $sb.nodeSelector)) (default dict $spec.nodeSelector) -}}
{{- $tolerations := concat (default list $spec.tolerations) (default list $sb.tolerations) -}}
{{- if .Values.gkeSandbox -}}
{{- $_ := set $spec "runtimeClassName" "gvisor" -}}
{{- $_ := set $nodeSelector "sandbox.gke.io/runtime" "gvisor" -}}
{{- $tolerations = append $tolerations (dict "key" "sandbox.gke.io/runtime" "operator" "Equal" "value" "gvisor" "effect" "NoSchedule") -}}
{{- end -}}
{{- if $nodeSelector -}}
{{- $_ := set $spec "nodeSelector" $nodeSelector -}}
{{- end -}}
{{- if $tolerations -}}
{{- $_ := set $spec "tolerations" $tolerations -}}
{{- end -}}
{{- if .Values.imagePullSecrets -}}
{{- $_ := set $spec "imagePullSecrets" .Values.imagePullSecrets -}}
{{- end -}}
{{- toYaml $pod -}}
{{- end -}}
