"""A diffusion model's denoiser: diffusers' UNet2DModel from a tiny config (two resolutions of 8 and 16 channels,
one ResNet block each, group norms of 4 groups, self-attention at the lower resolution, sinusoidal timestep
embeddings), seeded random weights, nothing downloaded, on 8x8 images of 3 channels, each row with its own
timestep. ``diffusers`` is a dev dependency (requirements-dev.txt)."""

import torch
from diffusers import UNet2DModel

from tests.corpus.common import image_rows, seeded


def make(batch: str = "1", size: str = "8"):
    def build():
        return UNet2DModel(sample_size=int(size), in_channels=3, out_channels=3, layers_per_block=1,
                           block_out_channels=(8, 16), down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                           up_block_types=("AttnUpBlock2D", "UpBlock2D"), norm_num_groups=4, attention_head_dim=8)

    b = int(batch)
    timesteps = torch.tensor([10 + 37 * r for r in range(b)])  # row 0's is 10 whatever the batch
    return seeded(build), {"sample": image_rows(b, int(size)), "timestep": timesteps}
