"""PyTorch Essentials course tooling."""
