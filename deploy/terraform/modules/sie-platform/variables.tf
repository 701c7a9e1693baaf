# Inputs of the shared platform: what runs on the cluster once it exists (the cloud stacks make the cluster).

variable "namespace" {
  description = "Kubernetes namespace for SIE (gateway, workers, NATS). Created by this module."
  type        = string
  default     = "sie"

  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", var.namespace))
    error_message = "namespace must be a DNS label (lower-case letters, digits and '-', at most 63 characters)."
  }
}

variable "release_name" {
  description = "Helm release name of the SIE chart; its objects are named after it (<release>-gateway, <release>-worker-<pool>)."
  type        = string
  default     = "sie"

  validation {
    condition     = can(regex("^[a-z]([-a-z0-9]{0,30}[a-z0-9])?$", var.release_name))
    error_message = "release_name must be a lower-case DNS label of at most 32 characters."
  }
}

variable "chart_path" {
  description = "Path of the SIE Helm chart; null means this repository's deploy/helm/sie."
  type        = string
  default     = null
}

variable "image_repository" {
  description = "Registry path of the sie-server images (deploy/docker/), without tag, e.g. 123456789012.dkr.ecr.eu-west-1.amazonaws.com/sie-server."
  type        = string

  validation {
    condition     = length(var.image_repository) > 0 && !can(regex(":[^/]*$", var.image_repository))
    error_message = "image_repository must be set and carry no tag (set image_tag and the pools' image.tag instead)."
  }
}

variable "image_tag" {
  description = "Image tag for the gateway and the pools that do not set their own (the CPU build)."
  type        = string
  default     = "0.1.0-cpu"
}

variable "pools" {
  description = "Worker pools, exactly as the chart's pools[] (keys name, device, gpus, memoryBudget, threads, resources, cacheSizeLimit, modelCache, tolerations, nodeSelector, keda, ...; see deploy/README.md)."
  type        = any
  default = [
    {
      name         = "cpu"
      device       = "cpu"
      memoryBudget = "6GiB"
      threads      = 2
      resources = {
        requests = { cpu = "2", memory = "8Gi" }
        limits   = { memory = "8Gi" }
      }
      cacheSizeLimit = "20Gi"
    },
  ]

  validation {
    condition     = length(var.pools) > 0 && alltrue([for p in var.pools : can(regex("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", p.name))])
    error_message = "pools must list at least one pool, and every pool name must be a lower-case DNS label."
  }

  validation {
    condition     = alltrue([for p in var.pools : contains(["cpu", "cuda"], lookup(p, "device", "cpu"))])
    error_message = "a pool's device must be cpu or cuda."
  }

  validation {
    condition     = alltrue([for p in var.pools : lookup(p, "device", "cpu") != "cuda" || lookup(p, "gpus", 0) >= 1])
    error_message = "a cuda pool needs gpus >= 1."
  }
}

variable "routes" {
  description = "Model id patterns (fnmatch, first match wins) to the pool that serves them; other models go to default_pool."
  type = list(object({
    pattern = string
    pool    = string
  }))
  default = []

  validation {
    condition     = alltrue([for r in var.routes : length(r.pattern) > 0 && !strcontains(r.pattern, "=")])
    error_message = "a route pattern must be non-empty and contain no '='."
  }
}

variable "default_pool" {
  description = "Pool for models that match no route; empty means the first pool."
  type        = string
  default     = ""
}

variable "gateway_replicas" {
  description = "Gateway replicas (stateless; two survive a node loss)."
  type        = number
  default     = 2

  validation {
    condition     = var.gateway_replicas >= 1 && floor(var.gateway_replicas) == var.gateway_replicas
    error_message = "gateway_replicas must be a whole number >= 1."
  }
}

variable "gateway_service_type" {
  description = "Service type of the gateway: LoadBalancer gives it an address outside the cluster (the gateway_url output), ClusterIP keeps it inside."
  type        = string
  default     = "LoadBalancer"

  validation {
    condition     = contains(["ClusterIP", "LoadBalancer"], var.gateway_service_type)
    error_message = "gateway_service_type must be ClusterIP or LoadBalancer."
  }
}

variable "gateway_service_annotations" {
  description = "Annotations of the gateway Service, e.g. the cloud's internal load balancer annotation."
  type        = map(string)
  default     = {}
}

variable "auth_tokens" {
  description = "Bearer tokens the gateway accepts. Stored in the Kubernetes Secret <release>-gateway-tokens that the chart reads (auth.existingSecret); never in the Helm values."
  type        = list(string)
  sensitive   = true

  validation {
    condition     = length(var.auth_tokens) > 0 && alltrue([for t in var.auth_tokens : can(regex("^[^,\\s]{16,}$", t))])
    error_message = "auth_tokens needs at least one token; each at least 16 characters, without commas or spaces."
  }
}

variable "service_account_annotations" {
  description = "Annotations of the chart's Kubernetes service account <release>, e.g. iam.gke.io/gcp-service-account (GKE Workload Identity) or eks.amazonaws.com/role-arn (IRSA)."
  type        = map(string)
  default     = {}
}

variable "storage_class" {
  description = "StorageClass for the JetStream volumes; null uses the cluster's default class."
  type        = string
  default     = null
}

variable "nats_storage_size" {
  description = "Size of each NATS JetStream file-store volume (a PVC per NATS pod)."
  type        = string
  default     = "10Gi"

  validation {
    condition     = can(regex("^[0-9]+(Mi|Gi|Ti)$", var.nats_storage_size))
    error_message = "nats_storage_size must be a Kubernetes quantity in Mi, Gi or Ti, e.g. 10Gi."
  }
}

variable "model_cache" {
  description = "Where each pool's workers keep downloaded weights (/cache), for pools that set no modelCache of their own: emptyDir (per pod, on the node's disk), ephemeral (a PVC per pod) or shared (one ReadWriteMany PVC per pool, kept across scale-to-zero; needs model_cache_storage_class)."
  type        = string
  default     = "emptyDir"

  validation {
    condition     = contains(["emptyDir", "ephemeral", "shared"], var.model_cache)
    error_message = "model_cache must be emptyDir, ephemeral or shared."
  }
}

variable "model_cache_storage_class" {
  description = "StorageClass of the model cache's PVCs: a ReadWriteMany class for shared (EFS, Filestore); for ephemeral, empty means the cluster's default class. Unused with emptyDir."
  type        = string
  default     = ""
}

variable "model_cache_size" {
  description = "Size of each model cache PVC (ephemeral: per pod; shared: per pool). Filestore's standard tier starts at 1Ti; EFS grows as needed and ignores it."
  type        = string
  default     = "100Gi"

  validation {
    condition     = can(regex("^[0-9]+(Gi|Ti)$", var.model_cache_size))
    error_message = "model_cache_size must be a Kubernetes quantity in Gi or Ti, e.g. 100Gi."
  }
}

variable "alerts" {
  description = "Create the chart's PrometheusRule with SIE's alert rules (alerts.enabled; needs the Prometheus Operator CRDs). null: on exactly when install_prometheus_stack is true."
  type        = bool
  default     = null
}

variable "alerts_interactive_p99_seconds" {
  description = "The objective for SIEInteractiveLatencyHigh: p99 seconds of interactive work per pool, from publish to first answer (alerts.interactiveP99Seconds)."
  type        = number
  default     = 2

  validation {
    condition     = var.alerts_interactive_p99_seconds > 0
    error_message = "alerts_interactive_p99_seconds must be above 0."
  }
}

variable "install_nvidia_device_plugin" {
  description = "Install NVIDIA's device plugin (advertises nvidia.com/gpu). Off on GKE, which runs its own."
  type        = bool
  default     = true
}

variable "install_keda" {
  description = "Install KEDA, which scales the worker pools from zero on JetStream lag. Off when the cluster already runs it."
  type        = bool
  default     = true
}

variable "install_prometheus_stack" {
  description = "Install kube-prometheus-stack (Prometheus Operator, Prometheus, Grafana with SIE's dashboards). Off to use an existing stack (see existing_grafana_url)."
  type        = bool
  default     = true
}

variable "service_monitors" {
  description = "Create the chart's ServiceMonitors (needs the Prometheus Operator CRDs: installed by install_prometheus_stack or already present)."
  type        = bool
  default     = true
}

variable "existing_grafana_url" {
  description = "URL of the Grafana you already run, returned as grafana_url when install_prometheus_stack is false."
  type        = string
  default     = ""
}

variable "grafana_admin_password" {
  description = "Grafana's admin password when install_prometheus_stack is true (kept in a Secret). No default: pass it from a secret store or TF_VAR_grafana_admin_password."
  type        = string
  sensitive   = true
  default     = null

  validation {
    condition     = var.grafana_admin_password == null || length(coalesce(var.grafana_admin_password, "x")) >= 12
    error_message = "grafana_admin_password must have at least 12 characters."
  }
}

variable "grafana_service_type" {
  description = "Service type of Grafana: ClusterIP (reach it with kubectl port-forward) or LoadBalancer."
  type        = string
  default     = "ClusterIP"

  validation {
    condition     = contains(["ClusterIP", "LoadBalancer"], var.grafana_service_type)
    error_message = "grafana_service_type must be ClusterIP or LoadBalancer."
  }
}

variable "chart_versions" {
  description = "Versions of the third-party charts (pin them; upgrade deliberately)."
  type = object({
    keda                  = optional(string, "2.16.1")
    nvidia_device_plugin  = optional(string, "0.17.0")
    kube_prometheus_stack = optional(string, "66.3.0")
  })
  default = {}
}
