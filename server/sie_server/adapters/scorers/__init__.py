"""Pair scorers for score: cross-encoders and LLM rerankers."""
