"""Causal LMs for generate: transformers, llama.cpp and SGLang."""
