# A VPC with one subnet (secondary ranges for pods and services) and Cloud NAT for the private nodes, unless
# network and subnetwork name existing ones.

locals {
  create_network = var.network == null

  network    = local.create_network ? google_compute_network.this[0].id : var.network
  subnetwork = local.create_network ? google_compute_subnetwork.this[0].id : var.subnetwork
}

resource "google_compute_network" "this" {
  count = local.create_network ? 1 : 0

  name                    = var.cluster_name
  auto_create_subnetworks = false
}

resource "google_compute_subnetwork" "this" {
  count = local.create_network ? 1 : 0

  name                     = "${var.cluster_name}-nodes"
  region                   = var.region
  network                  = google_compute_network.this[0].id
  ip_cidr_range            = var.subnet_cidr
  private_ip_google_access = true

  secondary_ip_range {
    range_name    = var.pods_range_name
    ip_cidr_range = var.pods_cidr
  }

  secondary_ip_range {
    range_name    = var.services_range_name
    ip_cidr_range = var.services_cidr
  }

  log_config {
    aggregation_interval = "INTERVAL_5_MIN"
    flow_sampling        = 0.5
    metadata             = "INCLUDE_ALL_METADATA"
  }
}

resource "google_compute_router" "this" {
  count = local.create_network ? 1 : 0

  name    = "${var.cluster_name}-router"
  region  = var.region
  network = google_compute_network.this[0].id
}

resource "google_compute_router_nat" "this" {
  count = local.create_network ? 1 : 0

  name                               = "${var.cluster_name}-nat"
  router                             = google_compute_router.this[0].name
  region                             = var.region
  nat_ip_allocate_option             = "AUTO_ONLY"
  source_subnetwork_ip_ranges_to_nat = "ALL_SUBNETWORKS_ALL_IP_RANGES"

  log_config {
    enable = true
    filter = "ERRORS_ONLY"
  }
}

# An explicit, logged deny of all other ingress below GKE's own rules (priority 1000), so that nothing else
# reaches the nodes through a rule added later by hand at a lower priority.
resource "google_compute_firewall" "deny_ingress" {
  count = local.create_network ? 1 : 0

  name      = "${var.cluster_name}-deny-ingress"
  network   = google_compute_network.this[0].id
  direction = "INGRESS"
  priority  = 65000

  source_ranges = ["0.0.0.0/0"]

  deny {
    protocol = "all"
  }

  log_config {
    metadata = "INCLUDE_ALL_METADATA"
  }
}
