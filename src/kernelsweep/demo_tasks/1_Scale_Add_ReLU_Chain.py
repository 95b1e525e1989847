import torch
import torch.nn as nn


class Model(nn.Module):
    """
    An elementwise chain over two inputs: scale the first, add the second and a
    per-feature offset, apply ReLU, then cap the result from above.
    Five memory-bound passes in eager PyTorch; one fused kernel needs only one.
    """

    def __init__(self, features: int, scale: float, cap: float):
        super(Model, self).__init__()
        self.scale = scale
        self.cap = cap
        self.offset = nn.Parameter(torch.linspace(-0.5, 0.5, features))

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, features).
            residual (torch.Tensor): shape (batch_size, features).

        Returns:
            torch.Tensor: shape (batch_size, features).
        """
        y = x * self.scale
        y = y + residual
        y = y + self.offset
        y = torch.relu(y)
        return torch.clamp(y, max=self.cap)


batch_size = 256
features = 512
scale = 1.7
cap = 2.5


def get_inputs():
    x = torch.randn(batch_size, features)
    residual = torch.randn(batch_size, features)
    return [x, residual]


def get_init_inputs():
    return [features, scale, cap]
