# A GPU cluster in europe-west4: a new VPC, 2-6 CPU nodes, 0-4 g2-standard-8 nodes with one NVIDIA L4 each,
# SIE with a cpu and a gpu pool, and the pods allowed to read a model bucket.
#
#   cp terraform.tfvars.example terraform.tfvars   # then fill in project and registry
#   export TF_VAR_auth_tokens='["<token>"]' TF_VAR_grafana_admin_password='<password>'
#   terraform init && terraform apply

terraform {
  required_version = ">= 1.5.0"
}

variable "project_id" {
  description = "Google Cloud project for the cluster."
  type        = string
}

variable "image_repository" {
  description = "Artifact Registry path of the sie-server images (tags 0.1.0-cpu and 0.1.0-cuda)."
  type        = string
}

variable "allowed_api_cidrs" {
  description = "CIDRs that may reach the Kubernetes API (your office, your CI runners)."
  type        = list(string)
}

variable "auth_tokens" {
  description = "Gateway bearer tokens (from TF_VAR_auth_tokens or a secret store, never committed)."
  type        = list(string)
  sensitive   = true
}

variable "grafana_admin_password" {
  description = "Grafana admin password (from TF_VAR_grafana_admin_password or a secret store)."
  type        = string
  sensitive   = true
}

module "sie" {
  source = "../"

  project_id   = var.project_id
  region       = "europe-west4"
  cluster_name = "sie-prod"
  labels       = { project = "sie", environment = "prod" }

  master_authorized_cidrs = var.allowed_api_cidrs

  cpu_machine_type      = "n2-standard-8"
  cpu_node_count        = { min = 2, max = 6 }
  gpu_machine_type      = "g2-standard-8"
  gpu_accelerator_type  = "nvidia-l4"
  gpu_accelerator_count = 1
  gpu_zones             = ["europe-west4-a", "europe-west4-b", "europe-west4-c"]
  gpu_node_count        = { min = 0, max = 4 }
  workload_roles        = ["roles/storage.objectViewer"]

  image_repository = var.image_repository
  image_tag        = "0.1.0-cpu"
  auth_tokens      = var.auth_tokens

  model_cache = "shared" # one ReadWriteMany model cache per pool (Filestore)

  gateway_internal       = true
  grafana_admin_password = var.grafana_admin_password
}

output "gateway_url" {
  description = "SIE gateway URL."
  value       = module.sie.gateway_url
}

output "grafana_url" {
  description = "Grafana URL."
  value       = module.sie.grafana_url
}
