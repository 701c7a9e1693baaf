# The workers' model cache (var.model_cache). shared: one EFS file system, mounted in every private subnet and
# reachable over NFS from the nodes only, behind the StorageClass efs-sc; each pool gets its own ReadWriteMany
# claim (an EFS access point) that all its workers share. ephemeral: a gp3 volume per worker pod instead.

locals {
  model_cache_shared        = var.model_cache == "shared"
  efs_storage_class         = "efs-sc"
  model_cache_storage_class = var.model_cache == "shared" ? local.efs_storage_class : local.storage_class
  # known at plan time (the subnet ids themselves are not, when the stack creates the VPC)
  private_subnet_count = local.create_vpc ? length(local.azs) : length(var.private_subnet_ids)
}

resource "aws_security_group" "efs" {
  count = local.model_cache_shared ? 1 : 0

  name        = "${var.cluster_name}-model-cache"
  description = "NFS from the EKS nodes to the SIE model cache (EFS)"
  vpc_id      = local.vpc_id

  ingress {
    description     = "NFS from the EKS nodes"
    from_port       = 2049
    to_port         = 2049
    protocol        = "tcp"
    security_groups = [module.eks.node_security_group_id]
  }
}

resource "aws_efs_file_system" "model_cache" {
  count = local.model_cache_shared ? 1 : 0

  creation_token   = "${var.cluster_name}-model-cache"
  encrypted        = true
  performance_mode = "generalPurpose"
  throughput_mode  = "elastic" # bursts of model downloads and cold-start reads, billed per use

  tags = { Name = "${var.cluster_name}-model-cache" }
}

resource "aws_efs_mount_target" "model_cache" {
  count = local.model_cache_shared ? local.private_subnet_count : 0

  file_system_id  = aws_efs_file_system.model_cache[0].id
  subnet_id       = local.private_subnet_ids[count.index]
  security_groups = [aws_security_group.efs[0].id]
}

# IRSA for the EFS CSI driver (the EKS add-on in eks.tf): its controller creates an access point per claim.
data "aws_iam_policy_document" "efs_csi_assume" {
  statement {
    actions = ["sts:AssumeRoleWithWebIdentity"]

    principals {
      type        = "Federated"
      identifiers = [module.eks.oidc_provider_arn]
    }

    condition {
      test     = "StringLike"
      variable = "${module.eks.oidc_provider}:sub"
      values   = ["system:serviceaccount:kube-system:efs-csi-*"]
    }

    condition {
      test     = "StringEquals"
      variable = "${module.eks.oidc_provider}:aud"
      values   = ["sts.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "efs_csi" {
  name               = "${var.cluster_name}-efs-csi"
  assume_role_policy = data.aws_iam_policy_document.efs_csi_assume.json
}

resource "aws_iam_role_policy_attachment" "efs_csi" {
  role       = aws_iam_role.efs_csi.name
  policy_arn = "arn:${data.aws_partition.current.partition}:iam::aws:policy/service-role/AmazonEFSCSIDriverPolicy"
}

# Dynamic provisioning through access points: each claim gets a directory under /sie-model-cache owned by the
# workers' user (the chart's runAsUser/runAsGroup 10001), which EFS enforces whatever the client's uid.
resource "kubernetes_storage_class_v1" "efs" {
  count = local.model_cache_shared ? 1 : 0

  metadata {
    name = local.efs_storage_class
  }

  storage_provisioner = "efs.csi.aws.com"
  reclaim_policy      = "Delete"

  parameters = {
    provisioningMode = "efs-ap"
    fileSystemId     = aws_efs_file_system.model_cache[0].id
    directoryPerms   = "700"
    uid              = "10001"
    gid              = "10001"
    basePath         = "/sie-model-cache"
  }

  depends_on = [module.eks]
}
