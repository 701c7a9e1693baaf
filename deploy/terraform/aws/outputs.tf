output "gateway_url" {
  description = "Base URL of the SIE gateway (send requests with Authorization: Bearer <one of auth_tokens>)."
  value       = module.platform.gateway_url
}

output "grafana_url" {
  description = "Grafana's URL (the SIE dashboards are in it); in-cluster name when its Service is ClusterIP: kubectl -n monitoring port-forward svc/kube-prometheus-stack-grafana 3000:80."
  value       = module.platform.grafana_url
}

output "cluster_name" {
  description = "EKS cluster name (aws eks update-kubeconfig --name <this>)."
  value       = module.eks.cluster_name
}
