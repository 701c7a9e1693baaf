# The workers' model cache (var.model_cache). shared: GKE's Filestore CSI driver (enabled in gke.tf) creates a
# Filestore instance in the cluster's network for each pool's ReadWriteMany claim, through the StorageClass
# below, and all the pool's workers share it. ephemeral: a balanced persistent disk per worker pod instead.

locals {
  model_cache_shared        = var.model_cache == "shared"
  filestore_storage_class   = "sie-filestore"
  model_cache_storage_class = var.model_cache == "shared" ? local.filestore_storage_class : "standard-rwo"
  # the Filestore driver takes the VPC's name, not its id or self link
  network_name = reverse(split("/", local.network))[0]
}

resource "google_project_service" "filestore" {
  count = local.model_cache_shared ? 1 : 0

  project            = var.project_id
  service            = "file.googleapis.com"
  disable_on_destroy = false
}

resource "kubernetes_storage_class_v1" "filestore" {
  count = local.model_cache_shared ? 1 : 0

  metadata {
    name = local.filestore_storage_class
  }

  storage_provisioner    = "filestore.csi.storage.gke.io"
  reclaim_policy         = "Delete"
  volume_binding_mode    = "Immediate" # one instance per claim, reachable from every zone of the region
  allow_volume_expansion = true

  parameters = {
    tier    = "standard" # basic HDD: 1-63.9 TiB; "premium" (basic SSD) starts at 2.5 TiB
    network = local.network_name
  }

  depends_on = [google_container_cluster.this, google_project_service.filestore]
}
