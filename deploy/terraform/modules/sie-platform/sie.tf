# This project's chart (deploy/helm/sie) with its NATS JetStream subchart, and the Secret with the gateway's tokens.

locals {
  chart_path = coalesce(var.chart_path, "${path.module}/../../../helm/sie")
  # the chart's fullname (fullnameOverride below): its objects' name prefix and its service account's name
  fullname         = var.release_name
  auth_secret_name = "${var.release_name}-gateway-tokens"

  # The model cache every pool gets unless it sets its own modelCache (the chart's pools[].modelCache).
  model_cache = var.model_cache == "emptyDir" ? { type = "emptyDir" } : {
    type         = var.model_cache
    size         = var.model_cache_size
    storageClass = var.model_cache_storage_class
  }
  pools = [for pool in var.pools : merge({ modelCache = local.model_cache }, pool)]

  # The values given to the chart. Only literals, var./local. references, comparisons, conditionals, list
  # `for` and merge(), so that tests/deploy/test_terraform.py (tests/deploy/hcl.py) can evaluate them and
  # check them against values.schema.json.
  sie_values = {
    fullnameOverride = local.fullname
    image = {
      repository = var.image_repository
      tag        = var.image_tag
    }
    serviceAccount = {
      create      = true
      annotations = var.service_account_annotations
    }
    auth = {
      existingSecret = local.auth_secret_name
      secretKey      = "SIE_AUTH_TOKENS"
    }
    gateway = {
      replicas    = var.gateway_replicas
      routes      = var.routes
      defaultPool = var.default_pool
      service = {
        type        = var.gateway_service_type
        port        = 8080
        annotations = var.gateway_service_annotations
      }
    }
    pools = local.pools
    keda = {
      enabled = true
    }
    serviceMonitor = {
      enabled = var.service_monitors
    }
    # SIE's PrometheusRule (deploy/README.md, Alerts): on by default when this module installs the
    # Prometheus stack; kube-prometheus-stack above selects every PrometheusRule, so no labels are needed.
    alerts = {
      enabled               = var.alerts == null ? var.install_prometheus_stack : var.alerts
      interactiveP99Seconds = var.alerts_interactive_p99_seconds
    }
    nats = {
      enabled = true
      config = {
        jetstream = {
          enabled = true
          fileStore = {
            enabled = true
            pvc = {
              enabled          = true
              size             = var.nats_storage_size
              storageClassName = var.storage_class
            }
          }
        }
      }
    }
  }
}

resource "kubernetes_namespace_v1" "sie" {
  metadata {
    name = var.namespace
  }
}

resource "kubernetes_secret_v1" "auth" {
  metadata {
    name      = local.auth_secret_name
    namespace = kubernetes_namespace_v1.sie.metadata[0].name
  }

  data = {
    SIE_AUTH_TOKENS = join(",", var.auth_tokens)
  }
}

resource "helm_release" "sie" {
  name              = var.release_name
  chart             = local.chart_path
  namespace         = kubernetes_namespace_v1.sie.metadata[0].name
  dependency_update = true # fetches the NATS chart into the chart's charts/
  timeout           = 900

  values = [yamlencode(local.sie_values)]

  lifecycle {
    precondition {
      condition     = var.model_cache != "shared" || var.model_cache_storage_class != ""
      error_message = "model_cache = \"shared\" needs model_cache_storage_class: a ReadWriteMany class (EFS on AWS, Filestore on GCP)."
    }
  }

  depends_on = [
    kubernetes_secret_v1.auth,
    helm_release.keda,
    helm_release.nvidia_device_plugin,
    helm_release.kube_prometheus_stack,
  ]
}

data "kubernetes_service_v1" "gateway" {
  metadata {
    name      = "${local.fullname}-gateway"
    namespace = kubernetes_namespace_v1.sie.metadata[0].name
  }

  depends_on = [helm_release.sie]
}

data "kubernetes_service_v1" "grafana" {
  count = var.install_prometheus_stack ? 1 : 0

  metadata {
    name      = "kube-prometheus-stack-grafana"
    namespace = kubernetes_namespace_v1.monitoring[0].metadata[0].name
  }

  depends_on = [helm_release.kube_prometheus_stack]
}
