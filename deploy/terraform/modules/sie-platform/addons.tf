# What the SIE chart expects on the cluster: GPUs advertised, KEDA, and (optionally) Prometheus + Grafana.

resource "helm_release" "nvidia_device_plugin" {
  count = var.install_nvidia_device_plugin ? 1 : 0

  name             = "nvidia-device-plugin"
  repository       = "https://nvidia.github.io/k8s-device-plugin"
  chart            = "nvidia-device-plugin"
  version          = var.chart_versions.nvidia_device_plugin
  namespace        = "nvidia-device-plugin"
  create_namespace = true

  # The chart tolerates the nvidia.com/gpu taint and runs on nodes labelled nvidia.com/gpu.present=true
  # (the cloud stacks label their GPU nodes so).
  values = [yamlencode({
    gfd = { enabled = false }
  })]
}

resource "helm_release" "keda" {
  count = var.install_keda ? 1 : 0

  name             = "keda"
  repository       = "https://kedacore.github.io/charts"
  chart            = "keda"
  version          = var.chart_versions.keda
  namespace        = "keda"
  create_namespace = true
}

resource "kubernetes_namespace_v1" "monitoring" {
  count = var.install_prometheus_stack ? 1 : 0

  metadata {
    name = "monitoring"
  }
}

resource "kubernetes_secret_v1" "grafana_admin" {
  count = var.install_prometheus_stack ? 1 : 0

  metadata {
    name      = "grafana-admin"
    namespace = kubernetes_namespace_v1.monitoring[0].metadata[0].name
  }

  data = {
    admin-user     = "admin"
    admin-password = var.grafana_admin_password
  }

  lifecycle {
    precondition {
      condition     = var.grafana_admin_password != null
      error_message = "install_prometheus_stack needs grafana_admin_password."
    }
  }
}

# SIE's two dashboards (deploy/grafana), picked up by Grafana's sidecar through the grafana_dashboard label.
resource "kubernetes_config_map_v1" "dashboards" {
  count = var.install_prometheus_stack ? 1 : 0

  metadata {
    name      = "sie-dashboards"
    namespace = kubernetes_namespace_v1.monitoring[0].metadata[0].name
    labels    = { grafana_dashboard = "1" }
  }

  data = {
    "sie-engine.json"  = file("${path.module}/../../../grafana/sie-engine.json")
    "sie-cluster.json" = file("${path.module}/../../../grafana/sie-cluster.json")
  }
}

resource "helm_release" "kube_prometheus_stack" {
  count = var.install_prometheus_stack ? 1 : 0

  name       = "kube-prometheus-stack"
  repository = "https://prometheus-community.github.io/helm-charts"
  chart      = "kube-prometheus-stack"
  version    = var.chart_versions.kube_prometheus_stack
  namespace  = kubernetes_namespace_v1.monitoring[0].metadata[0].name

  values = [yamlencode({
    prometheus = {
      prometheusSpec = {
        # select every ServiceMonitor and PrometheusRule, not only this release's
        serviceMonitorSelectorNilUsesHelmValues = false
        ruleSelectorNilUsesHelmValues           = false
        retention                               = "15d"
      }
    }
    grafana = {
      admin   = { existingSecret = kubernetes_secret_v1.grafana_admin[0].metadata[0].name, userKey = "admin-user", passwordKey = "admin-password" }
      service = { type = var.grafana_service_type }
      sidecar = { dashboards = { enabled = true, label = "grafana_dashboard", searchNamespace = "ALL" } }
    }
  })]
}
