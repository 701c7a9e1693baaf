# Everything on the cluster: the NVIDIA device plugin, KEDA, kube-prometheus-stack, NATS JetStream and SIE.

module "platform" {
  source = "../modules/sie-platform"

  namespace        = var.namespace
  image_repository = var.image_repository
  image_tag        = var.image_tag
  pools            = var.pools
  routes           = var.routes
  default_pool     = var.default_pool
  auth_tokens      = var.auth_tokens
  storage_class    = local.storage_class

  model_cache               = var.model_cache
  model_cache_storage_class = local.model_cache_storage_class
  model_cache_size          = var.model_cache_size

  gateway_service_type = var.gateway_service_type
  gateway_service_annotations = {
    "service.beta.kubernetes.io/aws-load-balancer-scheme" = var.gateway_internal ? "internal" : "internet-facing"
  }

  install_prometheus_stack = var.install_prometheus_stack
  existing_grafana_url     = var.existing_grafana_url
  grafana_admin_password   = var.grafana_admin_password

  alerts_interactive_p99_seconds = var.alerts_interactive_p99_seconds

  depends_on = [
    module.eks,
    aws_iam_role_policy_attachment.ebs_csi,
    kubernetes_storage_class_v1.gp3,
    aws_iam_role_policy_attachment.efs_csi,
    aws_efs_mount_target.model_cache,
    kubernetes_storage_class_v1.efs,
  ]
}
