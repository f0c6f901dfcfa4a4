"""Shared code for the LLM RL Environments course."""
