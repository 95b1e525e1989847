import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A small convolutional block: 3x3 convolution (same padding), ReLU, then
    2x2 max pooling, which halves the spatial size.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.pool = nn.MaxPool2d(kernel_size=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, in_channels, height, width).

        Returns:
            torch.Tensor: shape (batch_size, out_channels, height // 2, width // 2).
        """
        x = self.conv(x)
        x = torch.relu(x)
        return self.pool(x)


batch_size = 4
in_channels = 8
out_channels = 16
height = width = 32
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
