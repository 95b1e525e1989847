import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A linear layer (matrix multiply plus bias) whose output goes through a
    tanh-approximated GELU and a constant scale: a GEMM with an epilogue that
    can be fused into the GEMM's output stage.
    """

    def __init__(self, in_features: int, out_features: int, out_scale: float):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.out_scale = out_scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): shape (batch_size, in_features).

        Returns:
            torch.Tensor: shape (batch_size, out_features).
        """
        y = self.linear(x)
        y = torch.nn.functional.gelu(y, approximate="tanh")
        return y * self.out_scale


batch_size = 64
in_features = 256
out_features = 512
out_scale = 0.75


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, out_scale]
