# Everything on the cluster: KEDA, kube-prometheus-stack, NATS JetStream and SIE (GKE runs its own NVIDIA
# device plugin).

module "platform" {
  source = "../modules/sie-platform"

  namespace        = var.namespace
  image_repository = var.image_repository
  image_tag        = var.image_tag
  pools            = var.pools
  routes           = var.routes
  default_pool     = var.default_pool
  auth_tokens      = var.auth_tokens
  storage_class    = "standard-rwo" # GKE's balanced persistent disk class

  model_cache               = var.model_cache
  model_cache_storage_class = local.model_cache_storage_class
  model_cache_size          = var.model_cache_size

  service_account_annotations = {
    "iam.gke.io/gcp-service-account" = local.workloads_sa_email
  }

  gateway_service_type = var.gateway_service_type
  gateway_service_annotations = var.gateway_internal ? {
    "networking.gke.io/load-balancer-type" = "Internal"
  } : {}

  install_nvidia_device_plugin = false
  install_prometheus_stack     = var.install_prometheus_stack
  existing_grafana_url         = var.existing_grafana_url
  grafana_admin_password       = var.grafana_admin_password

  alerts_interactive_p99_seconds = var.alerts_interactive_p99_seconds

  depends_on = [
    google_container_node_pool.cpu,
    google_service_account_iam_member.workload_identity,
    kubernetes_storage_class_v1.filestore,
  ]
}
