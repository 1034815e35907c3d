"""tlint: a linter and runtime verifier for PyTorch transformer training code."""

__version__ = "0.2.0"
