import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, out_scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.out_scale = out_scale

    def forward(self, x):
        # addmm with the bias folded in, then GELU and the scale in place
        y = torch.addmm(self.linear.bias, x, self.linear.weight.t())
        return F.gelu(y, approximate="tanh").mul_(self.out_scale)
