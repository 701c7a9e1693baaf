"""Text and image encoders for encode (and bi-encoder score): embedders, SPLADE, ColBERT, BGE-M3,
CLIP/SigLIP, ColPali."""
