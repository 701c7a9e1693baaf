# Remote state. Without a backend block, state stays in a local terraform.tfstate. For a team, keep it in
# S3 with locking: create the bucket once (versioned, encrypted, public access blocked), uncomment, then
# run `terraform init -migrate-state`.
#
# terraform {
#   backend "s3" {
#     bucket       = "my-org-terraform-state"
#     key          = "sie/aws/terraform.tfstate"
#     region       = "eu-west-1"
#     encrypt      = true
#     use_lockfile = true # S3-native locking (Terraform >= 1.10); older versions: dynamodb_table = "terraform-locks"
#   }
# }
