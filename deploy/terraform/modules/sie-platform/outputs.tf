locals {
  gateway_lb = try(data.kubernetes_service_v1.gateway.status[0].load_balancer[0].ingress[0], null)
  grafana_lb = try(data.kubernetes_service_v1.grafana[0].status[0].load_balancer[0].ingress[0], null)

  gateway_host = local.gateway_lb == null ? "${local.fullname}-gateway.${var.namespace}.svc" : coalesce(local.gateway_lb.hostname, local.gateway_lb.ip)
  grafana_host = local.grafana_lb == null ? "kube-prometheus-stack-grafana.monitoring.svc" : coalesce(local.grafana_lb.hostname, local.grafana_lb.ip)
}

output "gateway_url" {
  description = "Base URL of the SIE gateway (the load balancer's address, or the in-cluster name when the Service is ClusterIP)."
  value       = "http://${local.gateway_host}:8080"
}

output "grafana_url" {
  description = "Grafana's URL (port 80): the installed stack's load balancer or in-cluster name, or existing_grafana_url."
  value       = var.install_prometheus_stack ? "http://${local.grafana_host}" : var.existing_grafana_url
}

output "namespace" {
  description = "Namespace SIE runs in."
  value       = kubernetes_namespace_v1.sie.metadata[0].name
}

output "auth_secret_name" {
  description = "Secret that holds the gateway's tokens (key SIE_AUTH_TOKENS)."
  value       = kubernetes_secret_v1.auth.metadata[0].name
}

output "service_account_name" {
  description = "Kubernetes service account of the gateway and the workers (bind cloud identities to it)."
  value       = local.fullname
}
