"""ethos-u-toolkit: PyTorch models on Arm Ethos-U NPUs, fused vs unfused."""

__version__ = "0.1.0"
