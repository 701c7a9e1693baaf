# Nodes run as a minimal service account that may write logs and metrics and pull images from Artifact
# Registry (image pulls on GKE use the node's identity). Pods use Workload Identity: the chart's Kubernetes
# service account acts as the workloads service account, which gets workload_roles (e.g. reading a model
# bucket) and nothing else.

resource "google_service_account" "nodes" {
  account_id   = "${var.cluster_name}-nodes"
  display_name = "SIE GKE nodes"
}

resource "google_project_iam_member" "nodes" {
  for_each = toset([
    "roles/logging.logWriter",
    "roles/monitoring.metricWriter",
    "roles/monitoring.viewer",
    "roles/stackdriver.resourceMetadata.writer",
    "roles/artifactregistry.reader",
  ])

  project = var.project_id
  role    = each.value
  member  = "serviceAccount:${google_service_account.nodes.email}"
}

locals {
  # the address Google gives a service account, known before it exists (the chart's annotation needs it)
  workloads_sa_email = "${var.cluster_name}-workloads@${var.project_id}.iam.gserviceaccount.com"
}

resource "google_service_account" "workloads" {
  account_id   = "${var.cluster_name}-workloads"
  display_name = "SIE gateway and workers (Workload Identity)"
}

resource "google_service_account_iam_member" "workload_identity" {
  service_account_id = google_service_account.workloads.name
  role               = "roles/iam.workloadIdentityUser"
  member             = "serviceAccount:${var.project_id}.svc.id.goog[${var.namespace}/${module.platform.service_account_name}]"
}

resource "google_project_iam_member" "workloads" {
  for_each = toset(var.workload_roles)

  project = var.project_id
  role    = each.value
  member  = "serviceAccount:${google_service_account.workloads.email}"
}
