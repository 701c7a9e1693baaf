# A GPU cluster in eu-west-1: a new VPC, 2-6 CPU nodes, 0-4 g6.xlarge (NVIDIA L4) nodes, SIE with a cpu and a gpu pool.
#
#   cp terraform.tfvars.example terraform.tfvars   # then fill in the image repository
#   export TF_VAR_auth_tokens='["<token>"]' TF_VAR_grafana_admin_password='<password>'
#   terraform init && terraform apply

terraform {
  required_version = ">= 1.5.0"
}

variable "image_repository" {
  description = "ECR repository with the sie-server images (tags 0.1.0-cpu and 0.1.0-cuda)."
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

  region       = "eu-west-1"
  cluster_name = "sie-prod"
  tags         = { project = "sie", environment = "prod", owner = "ml-platform" }

  cluster_endpoint_public_access_cidrs = var.allowed_api_cidrs

  cpu_instance_type = "m6i.2xlarge"
  cpu_node_count    = { min = 2, max = 6 }
  gpu_instance_type = "g6.xlarge"
  gpu_node_count    = { min = 0, max = 4 }
  gpu_node_disk_gib = 250

  image_repository = var.image_repository
  image_tag        = "0.1.0-cpu"
  auth_tokens      = var.auth_tokens

  model_cache = "shared" # one ReadWriteMany model cache per pool (EFS)

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
