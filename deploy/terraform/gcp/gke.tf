# A regional GKE cluster with private nodes, Workload Identity and Dataplane V2; a CPU node pool and a GPU
# node pool that scales from zero (GKE installs the NVIDIA driver and its device plugin, and taints the GPU
# nodes nvidia.com/gpu, so only the chart's cuda pools land there).

resource "google_container_cluster" "this" {
  name     = var.cluster_name
  location = var.region

  network    = local.network
  subnetwork = local.subnetwork

  # node pools are managed below
  remove_default_node_pool = true
  initial_node_count       = 1

  deletion_protection = var.deletion_protection
  datapath_provider   = "ADVANCED_DATAPATH" # Dataplane V2: enforces NetworkPolicy
  resource_labels     = var.labels

  enable_shielded_nodes       = true
  enable_intranode_visibility = true

  release_channel {
    channel = var.release_channel
  }

  addons_config {
    # Filestore volumes for the shared model cache (filestore.tf)
    gcp_filestore_csi_driver_config {
      enabled = var.model_cache == "shared"
    }
  }

  workload_identity_config {
    workload_pool = "${var.project_id}.svc.id.goog"
  }

  ip_allocation_policy {
    cluster_secondary_range_name  = var.pods_range_name
    services_secondary_range_name = var.services_range_name
  }

  private_cluster_config {
    enable_private_nodes    = true
    enable_private_endpoint = false
    master_ipv4_cidr_block  = var.master_cidr
  }

  master_authorized_networks_config {
    dynamic "cidr_blocks" {
      for_each = var.master_authorized_cidrs
      content {
        cidr_block   = cidr_blocks.value
        display_name = "authorized-${cidr_blocks.key}"
      }
    }
  }

  master_auth {
    client_certificate_config {
      issue_client_certificate = false
    }
  }

  node_config {
    workload_metadata_config {
      mode = "GKE_METADATA"
    }
    shielded_instance_config {
      enable_secure_boot          = true
      enable_integrity_monitoring = true
    }
  }
}

resource "google_container_node_pool" "cpu" {
  name     = "cpu"
  cluster  = google_container_cluster.this.id
  location = var.region

  autoscaling {
    total_min_node_count = var.cpu_node_count.min
    total_max_node_count = var.cpu_node_count.max
    location_policy      = "BALANCED"
  }

  management {
    auto_repair  = true
    auto_upgrade = true
  }

  node_config {
    machine_type    = var.cpu_machine_type
    image_type      = "COS_CONTAINERD"
    disk_type       = "pd-balanced"
    disk_size_gb    = var.cpu_node_disk_gb
    service_account = google_service_account.nodes.email
    oauth_scopes    = ["https://www.googleapis.com/auth/cloud-platform"]
    labels          = var.labels

    workload_metadata_config {
      mode = "GKE_METADATA"
    }

    shielded_instance_config {
      enable_secure_boot          = true
      enable_integrity_monitoring = true
    }
  }
}

resource "google_container_node_pool" "gpu" {
  name           = "gpu"
  cluster        = google_container_cluster.this.id
  location       = var.region
  node_locations = var.gpu_zones # the zones that offer gpu_accelerator_type

  autoscaling {
    total_min_node_count = var.gpu_node_count.min
    total_max_node_count = var.gpu_node_count.max
    location_policy      = "ANY" # take a GPU wherever one is free
  }

  management {
    auto_repair  = true
    auto_upgrade = true
  }

  node_config {
    machine_type    = var.gpu_machine_type
    image_type      = "COS_CONTAINERD"
    disk_type       = "pd-ssd"
    disk_size_gb    = var.gpu_node_disk_gb # the CUDA image (and the workers' model cache when it is an emptyDir)
    service_account = google_service_account.nodes.email
    oauth_scopes    = ["https://www.googleapis.com/auth/cloud-platform"]
    labels          = var.labels

    guest_accelerator {
      type  = var.gpu_accelerator_type
      count = var.gpu_accelerator_count

      gpu_driver_installation_config {
        gpu_driver_version = "LATEST"
      }
    }

    taint {
      key    = "nvidia.com/gpu"
      value  = "present"
      effect = "NO_SCHEDULE"
    }

    workload_metadata_config {
      mode = "GKE_METADATA"
    }

    shielded_instance_config {
      enable_secure_boot          = true
      enable_integrity_monitoring = true
    }
  }
}
