"""The detector: a small fully convolutional 3D CenterNet at stride 2.

No normalisation that depends on the input (batch norm is folded into the convolutions at
export), so a window's output depends only on the voxels it sees: tiling with a halo of the
receptive-field radius is exact.
"""

import torch
from torch import nn

# (in, out, stride, dilation) of each 3x3x3 convolution.
LAYERS = [(1, 12, 1, 1), (12, 32, 2, 1), (32, 32, 1, 1), (32, 48, 1, 2), (48, 48, 1, 4),
          (48, 48, 1, 2)]


def receptive_field(layers=LAYERS):
    """Receptive field (voxels) and total stride of the stack, exactly."""
    rf, jump = 1, 1
    for _, _, stride, dilation in layers:
        rf += 2 * dilation * jump
        jump *= stride
    return rf, jump


class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        blocks = []
        for c_in, c_out, stride, dilation in LAYERS:
            blocks += [nn.Conv3d(c_in, c_out, 3, stride, dilation, dilation, bias=False),
                       nn.BatchNorm3d(c_out), nn.ReLU(inplace=True)]
        self.body = nn.Sequential(*blocks)
        width = LAYERS[-1][1]

        def head(n):
            return nn.Sequential(nn.Conv3d(width, 32, 1), nn.ReLU(inplace=True),
                                 nn.Conv3d(32, n, 1))

        self.heat, self.size, self.offset = head(1), head(3), head(3)
        # CenterNet's prior: start with ~1 % positives so the focal loss is stable.
        nn.init.constant_(self.heat[-1].bias, -4.6)

    def raw(self, x):
        f = self.body(x)
        return self.heat(f), self.size(f), self.offset(f)

    def forward(self, x):
        """What the ONNX file computes: heatmap probability, box size in input voxels
        (x, y, z), offset in [0, 1) cells (x, y, z)."""
        heat, log_size, offset = self.raw(x)
        return torch.sigmoid(heat), torch.exp(log_size.clamp(-2, 5)), torch.sigmoid(offset)
