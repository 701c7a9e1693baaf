"""What every family shares: the adapter interfaces (base, encoder, generator, the media contract),
batch options, weights, precision, backends, and the transformers and GGUF plumbing."""
