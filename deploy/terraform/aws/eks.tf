# EKS with a CPU node group (system pods, the gateway, NATS, CPU workers) and a GPU node group that scales
# from zero: tainted nvidia.com/gpu so that only pods tolerating it (the chart's cuda pools) land there.

data "aws_partition" "current" {}

module "eks" {
  source  = "terraform-aws-modules/eks/aws"
  version = "~> 20.31"

  cluster_name    = var.cluster_name
  cluster_version = var.kubernetes_version

  vpc_id     = local.vpc_id
  subnet_ids = local.private_subnet_ids

  cluster_endpoint_public_access           = var.cluster_endpoint_public_access
  cluster_endpoint_public_access_cidrs     = var.cluster_endpoint_public_access_cidrs
  enable_cluster_creator_admin_permissions = true
  enable_irsa                              = true

  cluster_addons = {
    coredns    = {}
    kube-proxy = {}
    vpc-cni    = {}
    aws-ebs-csi-driver = {
      service_account_role_arn = aws_iam_role.ebs_csi.arn
    }
    aws-efs-csi-driver = { # the shared model cache (efs.tf)
      service_account_role_arn = aws_iam_role.efs_csi.arn
    }
  }

  eks_managed_node_groups = {
    cpu = {
      ami_type       = "AL2023_x86_64_STANDARD"
      instance_types = [var.cpu_instance_type]
      min_size       = var.cpu_node_count.min
      max_size       = var.cpu_node_count.max
      desired_size   = var.cpu_node_count.min

      block_device_mappings = {
        xvda = {
          device_name = "/dev/xvda"
          ebs = {
            volume_size           = var.cpu_node_disk_gib
            volume_type           = "gp3"
            encrypted             = true
            delete_on_termination = true
          }
        }
      }
    }

    gpu = {
      ami_type       = "AL2023_x86_64_NVIDIA" # NVIDIA driver and container toolkit preinstalled
      instance_types = [var.gpu_instance_type]
      min_size       = var.gpu_node_count.min
      max_size       = var.gpu_node_count.max
      desired_size   = var.gpu_node_count.min

      labels = {
        "nvidia.com/gpu.present" = "true" # where NVIDIA's device plugin runs
      }

      taints = {
        gpu = {
          key    = "nvidia.com/gpu"
          value  = "true"
          effect = "NO_SCHEDULE"
        }
      }

      # the CUDA image (and the workers' model cache when it is an emptyDir) lives on this disk
      block_device_mappings = {
        xvda = {
          device_name = "/dev/xvda"
          ebs = {
            volume_size           = var.gpu_node_disk_gib
            volume_type           = "gp3"
            encrypted             = true
            delete_on_termination = true
          }
        }
      }
    }
  }
}

# IRSA: the EBS CSI driver (JetStream's volumes) and the cluster autoscaler (node groups from zero) each get a
# role that only their service account can assume.
data "aws_iam_policy_document" "ebs_csi_assume" {
  statement {
    actions = ["sts:AssumeRoleWithWebIdentity"]

    principals {
      type        = "Federated"
      identifiers = [module.eks.oidc_provider_arn]
    }

    condition {
      test     = "StringEquals"
      variable = "${module.eks.oidc_provider}:sub"
      values   = ["system:serviceaccount:kube-system:ebs-csi-controller-sa"]
    }

    condition {
      test     = "StringEquals"
      variable = "${module.eks.oidc_provider}:aud"
      values   = ["sts.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "ebs_csi" {
  name               = "${var.cluster_name}-ebs-csi"
  assume_role_policy = data.aws_iam_policy_document.ebs_csi_assume.json
}

resource "aws_iam_role_policy_attachment" "ebs_csi" {
  role       = aws_iam_role.ebs_csi.name
  policy_arn = "arn:${data.aws_partition.current.partition}:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"
}

# The default StorageClass: encrypted gp3 through the EBS CSI driver.
locals {
  storage_class = "gp3"
}

resource "kubernetes_storage_class_v1" "gp3" {
  metadata {
    name = local.storage_class
    annotations = {
      "storageclass.kubernetes.io/is-default-class" = "true"
    }
  }

  storage_provisioner    = "ebs.csi.aws.com"
  reclaim_policy         = "Delete"
  volume_binding_mode    = "WaitForFirstConsumer"
  allow_volume_expansion = true

  parameters = {
    type      = "gp3"
    encrypted = "true"
  }

  depends_on = [module.eks]
}
