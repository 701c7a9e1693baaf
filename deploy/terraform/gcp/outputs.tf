output "gateway_url" {
  description = "Base URL of the SIE gateway (send requests with Authorization: Bearer <one of auth_tokens>)."
  value       = module.platform.gateway_url
}

output "grafana_url" {
  description = "Grafana's URL (the SIE dashboards are in it); in-cluster name when its Service is ClusterIP: kubectl -n monitoring port-forward svc/kube-prometheus-stack-grafana 3000:80."
  value       = module.platform.grafana_url
}

output "cluster_name" {
  description = "GKE cluster name (gcloud container clusters get-credentials <this> --region <region>)."
  value       = google_container_cluster.this.name
}
