"""Evaluation: retrieval recall on benchmark questions and (with a reader LLM) QA metrics."""
