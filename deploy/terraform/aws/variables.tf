variable "region" {
  description = "AWS region of the cluster, e.g. eu-west-1."
  type        = string

  validation {
    condition     = can(regex("^[a-z]{2}(-gov)?-[a-z]+-[0-9]$", var.region))
    error_message = "region must be an AWS region name such as eu-west-1."
  }
}

variable "tags" {
  description = "Tags put on every AWS resource this stack creates."
  type        = map(string)
  default     = { project = "sie" }
}

variable "cluster_name" {
  description = "EKS cluster name; also names the VPC and the IAM roles."
  type        = string
  default     = "sie"

  validation {
    condition     = can(regex("^[a-zA-Z][-a-zA-Z0-9]{0,37}$", var.cluster_name))
    error_message = "cluster_name must start with a letter and have at most 38 letters, digits or '-'."
  }
}

variable "kubernetes_version" {
  description = "EKS Kubernetes version."
  type        = string
  default     = "1.32"

  validation {
    condition     = can(regex("^1\\.[0-9]{2}$", var.kubernetes_version))
    error_message = "kubernetes_version must look like 1.32."
  }
}

variable "vpc_id" {
  description = "An existing VPC to use; null creates one (vpc_cidr, three AZs, NAT)."
  type        = string
  default     = null
}

variable "private_subnet_ids" {
  description = "Private subnets of the existing vpc_id for the control plane and the nodes (ignored when the stack creates the VPC)."
  type        = list(string)
  default     = []

  validation {
    condition     = var.vpc_id == null || length(var.private_subnet_ids) >= 2
    error_message = "with vpc_id, give at least two private_subnet_ids in different availability zones."
  }
}

variable "vpc_cidr" {
  description = "CIDR of the VPC the stack creates."
  type        = string
  default     = "10.40.0.0/16"

  validation {
    condition     = can(cidrhost(var.vpc_cidr, 0)) && tonumber(split("/", var.vpc_cidr)[1]) <= 18
    error_message = "vpc_cidr must be an IPv4 CIDR of /18 or larger."
  }
}

variable "single_nat_gateway" {
  description = "One NAT gateway for all AZs (cheaper) instead of one per AZ (survives an AZ outage)."
  type        = bool
  default     = true
}

variable "cluster_endpoint_public_access" {
  description = "Whether the Kubernetes API is reachable from the internet (from cluster_endpoint_public_access_cidrs)."
  type        = bool
  default     = true
}

variable "cluster_endpoint_public_access_cidrs" {
  description = "CIDRs allowed to reach the public Kubernetes API endpoint; narrow it to your offices and CI."
  type        = list(string)
  default     = ["0.0.0.0/0"]

  validation {
    condition     = alltrue([for c in var.cluster_endpoint_public_access_cidrs : can(cidrhost(c, 0))])
    error_message = "every entry must be a CIDR."
  }
}

variable "cpu_instance_type" {
  description = "Instance type of the CPU node group (system pods, gateway, NATS, CPU workers)."
  type        = string
  default     = "m6i.2xlarge"
}

variable "cpu_node_count" {
  description = "Size range of the CPU node group."
  type = object({
    min = number
    max = number
  })
  default = { min = 2, max = 6 }

  validation {
    condition     = var.cpu_node_count.min >= 1 && var.cpu_node_count.max >= var.cpu_node_count.min
    error_message = "cpu_node_count needs min >= 1 (system pods live there) and max >= min."
  }
}

variable "cpu_node_disk_gib" {
  description = "Root disk of CPU nodes in GiB (images and the CPU workers' model cache)."
  type        = number
  default     = 100

  validation {
    condition     = var.cpu_node_disk_gib >= 50
    error_message = "cpu_node_disk_gib must be at least 50."
  }
}

variable "gpu_instance_type" {
  description = "Instance type of the GPU node group, e.g. g5.xlarge (A10G 24 GB), g6.xlarge (L4), g6e.xlarge (L40S)."
  type        = string
  default     = "g5.xlarge"

  validation {
    condition     = can(regex("^(g4dn|g5|g5g|g6|g6e|gr6|p3|p4d|p4de|p5|p5e)\\.", var.gpu_instance_type))
    error_message = "gpu_instance_type must be an NVIDIA GPU instance type (g4dn, g5, g6, g6e, gr6, p3, p4d, p5 families)."
  }
}

variable "gpu_node_count" {
  description = "Size range of the GPU node group; min 0 lets it scale to zero when the gpu pool is idle."
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

variable "gpu_node_disk_gib" {
  description = "Root disk of GPU nodes in GiB: holds the CUDA image and the workers' model cache."
  type        = number
  default     = 200

  validation {
    condition     = var.gpu_node_disk_gib >= 100
    error_message = "gpu_node_disk_gib must be at least 100 (the CUDA image alone is several GB)."
  }
}

variable "cluster_autoscaler_chart_version" {
  description = "Version of the cluster-autoscaler chart (match its app version to kubernetes_version)."
  type        = string
  default     = "9.46.6"
}

variable "namespace" {
  description = "Namespace for SIE and its NATS."
  type        = string
  default     = "sie"
}

variable "image_repository" {
  description = "Registry path of the sie-server images without tag (e.g. an ECR repository the nodes can pull from)."
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
      threads        = 8
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
      threads                       = 3
      resources                     = { requests = { cpu = "3", memory = "12Gi" }, limits = { memory = "12Gi" } }
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
  description = "Bearer tokens the gateway accepts (sensitive, no default): pass them from a secret store, e.g. TF_VAR_auth_tokens or data.aws_secretsmanager_secret_version in a wrapping module."
  type        = list(string)
  sensitive   = true
}

variable "gateway_service_type" {
  description = "LoadBalancer (an AWS load balancer in front of the gateway) or ClusterIP."
  type        = string
  default     = "LoadBalancer"
}

variable "gateway_internal" {
  description = "Make the gateway's load balancer internal (reachable only inside the VPC)."
  type        = bool
  default     = true
}

variable "model_cache" {
  description = "The workers' model cache (/cache): shared (one EFS-backed ReadWriteMany volume per pool, kept across scale-to-zero: each model is downloaded once per pool) or ephemeral (a gp3 volume per worker pod, gone with the pod). A pool in `pools` may set its own modelCache."
  type        = string
  default     = "shared"

  validation {
    condition     = contains(["shared", "ephemeral"], var.model_cache)
    error_message = "model_cache must be shared or ephemeral."
  }
}

variable "model_cache_size" {
  description = "Size of each model cache claim (shared: per pool, nominal on EFS, which grows as needed; ephemeral: per worker pod)."
  type        = string
  default     = "200Gi"

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
