"""OpenAI's Batch API: files and batches of requests run beside live calls at the background priority."""
