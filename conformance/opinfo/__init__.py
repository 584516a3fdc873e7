"""The OpInfo suite: PyTorch's OpInfo database run on a device against CPU."""
