{{- /*
A pool's model cache, mounted at /cache (HF_HOME /cache/huggingface, SIE_CACHE_DIR /cache/sie), from
pools[].modelCache:
  emptyDir  (default) a per-pod emptyDir on the node's disk, sizeLimit size or cacheSizeLimit; gone with the pod
  ephemeral a generic ephemeral volume: a PVC per pod from a template (size, storageClass, accessMode
            ReadWriteOnce), kept across container restarts, deleted with the pod
  shared    one ReadWriteMany PVC per pool (templates/model-cache-pvc.yaml, or existingClaim) that every worker
            of the pool mounts: a model is downloaded once per pool and survives scale-to-zero
values.schema.json refuses combinations that do not fit (shared without an RWX class or claim, ...).
*/ -}}

{{- /* The pool's modelCache with its defaults filled in, as YAML (read it back with fromYaml). */ -}}
{{- define "sie.modelCache" -}}
{{- $cache := .modelCache | default dict }}
{{- $type := $cache.type | default "emptyDir" }}
{{- $access := $cache.accessMode | default (eq $type "shared" | ternary "ReadWriteMany" "ReadWriteOnce") }}
type: {{ $type }}
size: {{ $cache.size | default .cacheSizeLimit | default "" | toString | quote }}
storageClass: {{ $cache.storageClass | default "" | quote }}
existingClaim: {{ $cache.existingClaim | default "" | quote }}
accessMode: {{ $access }}
{{- end }}

{{- /* The shared claim of a pool: existingClaim, or <fullname>-model-cache-<pool>. Takes dict root, pool. */ -}}
{{- define "sie.modelCacheClaimName" -}}
{{- $cache := include "sie.modelCache" .pool | fromYaml }}
{{- $cache.existingClaim | default (printf "%s-model-cache-%s" (include "sie.fullname" .root) .pool.name) }}
{{- end }}

{{- /* The source of the worker's `cache` volume (the part after `name: cache`). Takes dict root, pool. */ -}}
{{- define "sie.modelCacheVolume" -}}
{{- $cache := include "sie.modelCache" .pool | fromYaml }}
{{- if eq $cache.type "shared" }}
persistentVolumeClaim:
  claimName: {{ include "sie.modelCacheClaimName" . }}
{{- else if eq $cache.type "ephemeral" }}
ephemeral:
  volumeClaimTemplate:
    metadata:
      labels:
        {{- include "sie.selectorLabels" .root | nindent 8 }}
        app.kubernetes.io/component: model-cache
        sie.dev/pool: {{ .pool.name }}
    spec:
      accessModes: [{{ $cache.accessMode }}]
      {{- with $cache.storageClass }}
      storageClassName: {{ . | quote }}
      {{- end }}
      resources:
        requests:
          storage: {{ $cache.size | quote }}
{{- else }}
emptyDir:
  {{- with $cache.size }}
  sizeLimit: {{ . }}
  {{- else }}
  {}
  {{- end }}
{{- end }}
{{- end }}
