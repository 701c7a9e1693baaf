# Remote state. Without a backend block, state stays in a local terraform.tfstate. For a team, keep it in a
# GCS bucket (versioning on, uniform bucket-level access; GCS locks the state by itself): uncomment, then
# run `terraform init -migrate-state`.
#
# terraform {
#   backend "gcs" {
#     bucket = "my-org-terraform-state"
#     prefix = "sie/gcp"
#   }
# }
