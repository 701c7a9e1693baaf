variable "project_id" {
  description = "Google Cloud project that holds the cluster."
  type        = string

  validation {
    condition     = can(regex("^[a-z][-a-z0-9]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a Google Cloud project id (6-30 lower-case letters, digits, '-')."
  }
}

variable "region" {
  description = "Region of the (regional) cluster, e.g. europe-west4."
  type        = string

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]$", var.region))
    error_message = "region must be a Google Cloud region such as europe-west4."
  }
}

variable "labels" {
  description = "Labels put on the cluster and its nodes."
  type        = map(string)
  default     = { project = "sie" }
}

variable "cluster_name" {
  description = "GKE cluster name; also names the network and the service accounts."
  type        = string
  default     = "sie"

  validation {
    condition     = can(regex("^[a-z][-a-z0-9]{0,19}$", var.cluster_name))
    error_message = "cluster_name must start with a lower-case letter and have at most 20 lower-case letters, digits or '-' (service account ids add a suffix)."
  }
}

variable "release_channel" {
  description = "GKE release channel."
  type        = string
  default     = "REGULAR"

  validation {
    condition     = contains(["RAPID", "REGULAR", "STABLE"], var.release_channel)
    error_message = "release_channel must be RAPID, REGULAR or STABLE."
  }
}

variable "deletion_protection" {
  description = "Refuse `terraform destroy` of the cluster until this is set to false."
  type        = bool
  default     = true
}

variable "network" {
  description = "An existing VPC network (id or self link) to use; null creates one with a subnet and Cloud NAT."
  type        = string
  default     = null
}

variable "subnetwork" {
  description = "The existing subnetwork of `network` for the nodes; it needs secondary ranges named pods_range_name and services_range_name."
  type        = string
  default     = null

  validation {
    condition     = var.network == null || var.subnetwork != null
    error_message = "with network, give its subnetwork too."
  }
}

variable "subnet_cidr" {
  description = "Primary range of the subnet the stack creates (nodes)."
  type        = string
  default     = "10.50.0.0/20"

  validation {
    condition     = can(cidrhost(var.subnet_cidr, 0))
    error_message = "subnet_cidr must be an IPv4 CIDR."
  }
}

variable "pods_cidr" {
  description = "Secondary range for pods in the subnet the stack creates."
  type        = string
  default     = "10.52.0.0/14"

  validation {
    condition     = can(cidrhost(var.pods_cidr, 0))
    error_message = "pods_cidr must be an IPv4 CIDR."
  }
}

variable "services_cidr" {
  description = "Secondary range for services in the subnet the stack creates."
  type        = string
  default     = "10.51.0.0/20"

  validation {
    condition     = can(cidrhost(var.services_cidr, 0))
    error_message = "services_cidr must be an IPv4 CIDR."
  }
}

variable "pods_range_name" {
  description = "Name of the subnet's secondary range for pods."
  type        = string
  default     = "pods"
}

variable "services_range_name" {
  description = "Name of the subnet's secondary range for services."
  type        = string
  default     = "services"
}

variable "master_cidr" {
  description = "The /28 the GKE control plane's private endpoint uses (must not overlap the subnet's ranges)."
  type        = string
  default     = "172.16.0.0/28"

  validation {
    condition     = can(cidrhost(var.master_cidr, 0)) && endswith(var.master_cidr, "/28")
    error_message = "master_cidr must be a /28."
  }
}

variable "master_authorized_cidrs" {
  description = "CIDRs allowed to reach the Kubernetes API (your offices, your CI)."
  type        = list(string)

  validation {
    condition     = length(var.master_authorized_cidrs) > 0 && alltrue([for c in var.master_authorized_cidrs : can(cidrhost(c, 0))])
    error_message = "master_authorized_cidrs needs at least one CIDR."
  }
}

variable "cpu_machine_type" {
  description = "Machine type of the CPU node pool (system pods, gateway, NATS, CPU workers)."
  type        = string
  default     = "n2-standard-8"
}

variable "cpu_node_count" {
  description = "Size range of the CPU node pool, in nodes across all zones."
  type = object({
    min = number
    max = number
  })
  default = { min = 2, max = 6 }

  validation {
    condition     = var.cpu_node_count.min >= 1 && var.cpu_node_count.max >= var.cpu_node_count.min
    error_message = "cpu_node_count needs min >= 1 and max >= min."
  }
}

variable "cpu_node_disk_gb" {
  description = "Boot disk of CPU nodes in GB (images and the CPU workers' model cache)."
  type        = number
  default     = 100

  validation {
    condition     = var.cpu_node_disk_gb >= 50
    error_message = "cpu_node_disk_gb must be at least 50."
  }
}

variable "gpu_machine_type" {
  description = "Machine type of the GPU node pool; must fit the accelerator (g2-* for nvidia-l4, a2-* for A100, n1-* for nvidia-tesla-t4)."
  type        = string
  default     = "g2-standard-8"
}

variable "gpu_accelerator_type" {
  description = "GPU type per GPU node."
  type        = string
  default     = "nvidia-l4"

  validation {
    condition     = contains(["nvidia-l4", "nvidia-tesla-t4", "nvidia-tesla-a100", "nvidia-a100-80gb", "nvidia-h100-80gb", "nvidia-tesla-v100"], var.gpu_accelerator_type)
    error_message = "gpu_accelerator_type must be one of nvidia-l4, nvidia-tesla-t4, nvidia-tesla-a100, nvidia-a100-80gb, nvidia-h100-80gb, nvidia-tesla-v100."
  }
}

variable "gpu_accelerator_count" {
  description = "GPUs per GPU node (each gpu worker takes one)."
  type        = number
  default     = 1

  validation {
    condition     = contains([1, 2, 4, 8], var.gpu_accelerator_count)
    error_message = "gpu_accelerator_count must be 1, 2, 4 or 8."
  }
}

variable "gpu_zones" {
  description = "Zones of the region where the GPU node pool may run (those that offer gpu_accelerator_type)."
  type        = list(string)

  validation {
    condition     = length(var.gpu_zones) > 0
    error_message = "give at least one zone for the GPU node pool."
  }
}

variable "gpu_node_count" {
  description = "Size range of the GPU node pool across gpu_zones; min 0 lets it scale to zero."
  type = object({
    min = number
    max = number
  })
  default = { min = 0, max = 4 }

  validation {
    condition     = var.gpu_node_count.min >= 0 && var.gpu_node_count.max >= 1 && var.gpu_node_count.max >= var.gpu_node_count.min
    error_message = "gpu_node_count needs min >= 0, max >= 1 and max >= min."
  }
}

variable "gpu_node_disk_gb" {
  description = "Boot disk of GPU nodes in GB: holds the CUDA image and the workers' model cache."
  type        = number
  default     = 200

  validation {
    condition     = var.gpu_node_disk_gb >= 100
    error_message = "gpu_node_disk_gb must be at least 100 (the CUDA image alone is several GB)."
  }
}

variable "workload_roles" {
  description = "Project roles for the pods' Workload Identity service account, e.g. roles/storage.objectViewer for a model bucket."
  type        = list(string)
  default     = []
}

variable "namespace" {
  description = "Namespace for SIE and its NATS."
  type        = string
  default     = "sie"
}

variable "image_repository" {
  description = "Artifact Registry path of the sie-server images without tag, e.g. europe-west4-docker.pkg.dev/PROJECT/sie/sie-server."
  type        = string
}

variable "image_tag" {
  description = "Tag of the CPU image (gateway and CPU pools); the gpu pool sets its own CUDA tag in pools."
  type        = string
  default     = "0.1.0-cpu"
}

variable "pools" {
  description = "Worker pools in the chart's pools[] format. The default is a cpu pool and a gpu pool tolerating the GPU nodes' taint."
  type        = any
  default = [
    {
      name           = "cpu"
      device         = "cpu"
      memoryBudget   = "12GiB"
      threads        = 7
      resources      = { requests = { cpu = "7", memory = "16Gi" }, limits = { memory = "16Gi" } }
      cacheSizeLimit = "40Gi"
      keda           = { maxReplicaCount = 8 }
    },
    {
      name                          = "gpu"
      device                        = "cuda"
      gpus                          = 1
      image                         = { tag = "0.1.0-cuda" }
      memoryBudget                  = "0.85"
      threads                       = 6
      resources                     = { requests = { cpu = "6", memory = "24Gi" }, limits = { memory = "24Gi" } }
      cacheSizeLimit                = "100Gi"
      terminationGracePeriodSeconds = 300
      tolerations                   = [{ key = "nvidia.com/gpu", operator = "Exists", effect = "NoSchedule" }]
      keda                          = { maxReplicaCount = 4, cooldownPeriod = 600 }
    },
  ]
}

variable "routes" {
  description = "Model id patterns to pools (fnmatch, first match wins); the default sends the catalog's generation models to gpu, as values-gpu.yaml does."
  type = list(object({
    pattern = string
    pool    = string
  }))
  default = [
    { pattern = "HuggingFaceTB/SmolLM*", pool = "gpu" },
    { pattern = "meta-llama/Llama-*", pool = "gpu" },
    { pattern = "google/gemma-*", pool = "gpu" },
    { pattern = "microsoft/Phi-*", pool = "gpu" },
    { pattern = "Qwen/Qwen2.5-*", pool = "gpu" },
    { pattern = "Qwen/Qwen3-[0-9]*", pool = "gpu" },
  ]
}

variable "default_pool" {
  description = "Pool for models that match no route."
  type        = string
  default     = "cpu"
}

variable "auth_tokens" {
  description = "Bearer tokens the gateway accepts (sensitive, no default): pass them from a secret store, e.g. TF_VAR_auth_tokens or data.google_secret_manager_secret_version in a wrapping module."
  type        = list(string)
  sensitive   = true
}

variable "gateway_service_type" {
  description = "LoadBalancer (a Google Cloud load balancer in front of the gateway) or ClusterIP."
  type        = string
  default     = "LoadBalancer"
}

variable "gateway_internal" {
  description = "Make the gateway's load balancer internal (reachable only inside the VPC)."
  type        = bool
  default     = true
}

variable "model_cache" {
  description = "The workers' model cache (/cache): shared (one Filestore-backed ReadWriteMany volume per pool: a Filestore instance each, 1 TiB minimum, kept across scale-to-zero: each model is downloaded once per pool) or ephemeral (a balanced persistent disk per worker pod, gone with the pod). A pool in `pools` may set its own modelCache."
  type        = string
  default     = "shared"

  validation {
    condition     = contains(["shared", "ephemeral"], var.model_cache)
    error_message = "model_cache must be shared or ephemeral."
  }
}

variable "model_cache_size" {
  description = "Size of each model cache claim (shared: per pool, the Filestore instance's capacity, at least 1Ti on the standard tier; ephemeral: per worker pod)."
  type        = string
  default     = "1Ti"

  validation {
    condition     = can(regex("^[0-9]+(Gi|Ti)$", var.model_cache_size))
    error_message = "model_cache_size must be a quantity in Gi or Ti, e.g. 200Gi."
  }
}

variable "alerts_interactive_p99_seconds" {
  description = "Objective of the SIEInteractiveLatencyHigh alert: p99 seconds of interactive work per pool (the alerts are on when install_prometheus_stack is)."
  type        = number
  default     = 2

  validation {
    condition     = var.alerts_interactive_p99_seconds > 0
    error_message = "alerts_interactive_p99_seconds must be above 0."
  }
}

variable "install_prometheus_stack" {
  description = "Install kube-prometheus-stack with Grafana and SIE's dashboards; false to use a stack you already run."
  type        = bool
  default     = true
}

variable "existing_grafana_url" {
  description = "Your Grafana's URL, returned as grafana_url when install_prometheus_stack is false."
  type        = string
  default     = ""
}

variable "grafana_admin_password" {
  description = "Grafana admin password (sensitive, no default; needed when install_prometheus_stack is true)."
  type        = string
  sensitive   = true
  default     = null
}
