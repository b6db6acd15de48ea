"""Text before models: token counting (tiktoken) and chunking documents into leaves."""
