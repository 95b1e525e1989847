"""kernelsweep: measure how well language models write GPU kernels."""

__version__ = "0.1.0"
