"""The VLA network: front camera (RGB + depth) + instruction + proprioception -> where to pick, where to place,
and whether the task is done.

CLIPort's idea at a size that plans in a few milliseconds on two CPU cores: a small fully convolutional U-Net
over the image (plus two coordinate channels, so that positions are easy to read out), conditioned on the
language at every block by FiLM (a scale and a shift per channel from the instruction), whose last layer is a
language-made 1x1 kernel per head: the pick and place heatmaps are the dot product of each pixel's features with
a vector the instruction produced. The heatmaps are at half the input resolution (48 x 48 cells of ~2 cm on
the table for the default 96 px image); their argmax is lifted to 3-D with the depth image. A third head reads
the bottleneck (mean- and max-pooled), the last features (max-pooled) and the instruction: the task is done.

The instruction arrives as frozen sub-word embeddings (:mod:`.text`); a bidirectional GRU (learned) reads them
in order ("red on blue" is not "blue on red") and attention-pools them into one vector.

With ``attention`` (the default of new models; models trained before it load without), one transformer block sits
at the bottleneck (S/8 cells): the cells attend to each other (a relation such as "the bin next to the red bin"
or "between" spans the table, more than a stack of 3x3 convolutions sees) and then to the instruction's words
one by one (a multi-step instruction names several blocks; one pooled vector has to blur them, a cell can look
up the word that concerns it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812


@dataclass(frozen=True)
class NetConfig:
    image_size: int = 96
    text_dim: int = 576  # the frozen embeddings' width
    text_hidden: int = 128  # per GRU direction
    proprio_dim: int = 4
    width: int = 16  # channels of the first block; doubles twice
    depth_centre: float = 1.0  # m: depth is fed as (d - centre) / scale
    depth_scale: float = 0.5
    attention: bool = False  # a transformer block at the bottleneck (self- and cross-attention to the words)
    heads: int = 4

    def to_dict(self) -> dict:
        return asdict(self)


class FiLMBlock(nn.Module):
    def __init__(self, cin: int, cout: int, cond: int, stride: int = 1, kernel: int = 3) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, stride=stride, padding=kernel // 2)
        self.norm = nn.GroupNorm(8, cout)
        self.film = nn.Linear(cond, 2 * cout)

    def forward(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        gamma, beta = self.film(c).chunk(2, dim=-1)
        h = self.norm(self.conv(x))
        return F.relu(h * (1 + gamma[:, :, None, None]) + beta[:, :, None, None])


class TextEncoder(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, hidden)
        self.gru = nn.GRU(hidden, hidden, batch_first=True, bidirectional=True)
        self.attend = nn.Linear(2 * hidden, 1)
        self.out_dim = 2 * hidden

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``tokens`` (B, L, dim), ``mask`` (B, L) True where a token is -> the pooled vector (B, 2 * hidden) and
        the per-token states (B, L, 2 * hidden)."""
        lengths = mask.sum(1).clamp(min=1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(
            torch.tanh(self.proj(tokens)), lengths, batch_first=True, enforce_sorted=False
        )
        h, _ = self.gru(packed)
        h, _ = nn.utils.rnn.pad_packed_sequence(h, batch_first=True, total_length=tokens.shape[1])
        score = self.attend(h).squeeze(-1).masked_fill(~mask, float("-inf"))
        return (torch.softmax(score, dim=1).unsqueeze(-1) * h).sum(1), h


class BottleneckAttention(nn.Module):
    """Pre-norm transformer block over the bottleneck's cells: self-attention (with a learned position per cell),
    cross-attention to the instruction's token states, an MLP; all residual."""

    def __init__(self, channels: int, text_channels: int, cells: int, heads: int) -> None:
        super().__init__()
        self.pos = nn.Parameter(torch.zeros(1, cells * cells, channels))
        self.norms = nn.ModuleList(nn.LayerNorm(channels) for _ in range(3))
        self.self_attn = nn.MultiheadAttention(channels, heads, batch_first=True)
        self.cross = nn.MultiheadAttention(channels, heads, kdim=text_channels, vdim=text_channels, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(channels, 2 * channels), nn.ReLU(), nn.Linear(2 * channels, channels))

    def forward(self, h: torch.Tensor, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, c, hh, ww = h.shape
        x = h.flatten(2).transpose(1, 2) + self.pos
        y = self.norms[0](x)
        x = x + self.self_attn(y, y, y, need_weights=False)[0]
        y = self.norms[1](x)
        x = x + self.cross(y, states, states, key_padding_mask=~mask, need_weights=False)[0]
        x = x + self.mlp(self.norms[2](x))
        return x.transpose(1, 2).reshape(b, c, hh, ww)


class VLANet(nn.Module):
    def __init__(self, cfg: NetConfig | None = None) -> None:
        super().__init__()
        self.cfg = cfg = cfg or NetConfig()
        if cfg.image_size % 16:
            raise ValueError(f"image_size must be a multiple of 16, got {cfg.image_size}")
        self.text = TextEncoder(cfg.text_dim, cfg.text_hidden)
        cond = self.text.out_dim + 32
        self.proprio = nn.Linear(cfg.proprio_dim, 32)
        w = cfg.width
        self.stem = FiLMBlock(6, w, cond, stride=2, kernel=5)  # S/2
        self.down1 = FiLMBlock(w, 2 * w, cond, stride=2)  # S/4
        self.down2 = FiLMBlock(2 * w, 4 * w, cond, stride=2)  # S/8
        self.mid = FiLMBlock(4 * w, 4 * w, cond)
        self.mid2 = FiLMBlock(4 * w, 4 * w, cond)
        self.attend = (
            BottleneckAttention(4 * w, self.text.out_dim, cfg.image_size // 8, cfg.heads) if cfg.attention else None
        )
        self.up1 = FiLMBlock(4 * w + 2 * w, 2 * w, cond)  # S/4
        self.up2 = FiLMBlock(2 * w + w, w, cond)  # S/2
        self.kernels = nn.Linear(cond, 2 * (w + 1))  # a 1x1 kernel and bias per head (pick, place)
        self.done = nn.Sequential(nn.Linear(2 * 4 * w + w + cond, 128), nn.ReLU(), nn.Linear(128, 1))

    def forward(
        self, rgb: torch.Tensor, depth: torch.Tensor, proprio: torch.Tensor, tokens: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``rgb`` (B, S, S, 3) uint8, ``depth`` (B, S, S) metres, ``proprio`` (B, 4), ``tokens`` (B, L, 576) and
        ``mask`` (B, L) -> pick and place logits (B, S/2, S/2) each, done logit (B,)."""
        b, s = rgb.shape[0], rgb.shape[1]
        x = rgb.permute(0, 3, 1, 2).float() / 255.0 - 0.5
        # a robot's depth has holes (NaN): read as far away, as the simulators' "nothing hit" is
        d = torch.nan_to_num((depth.float() - self.cfg.depth_centre) / self.cfg.depth_scale, nan=3.0)
        d = d.clamp(-3, 3).unsqueeze(1)
        ramp = torch.linspace(-1.0, 1.0, s, device=rgb.device)
        coords = torch.stack(torch.meshgrid(ramp, ramp, indexing="ij")).expand(b, 2, s, s)
        x = torch.cat([x, d, coords], dim=1)
        pooled_text, states = self.text(tokens, mask)
        c = torch.cat([pooled_text, F.relu(self.proprio(proprio))], dim=-1)
        h1 = self.stem(x, c)
        h2 = self.down1(h1, c)
        h3 = self.mid2(self.mid(self.down2(h2, c), c), c)
        if self.attend is not None:
            h3 = self.attend(h3, states, mask)
        u = self.up1(torch.cat([F.interpolate(h3, scale_factor=2.0, mode="nearest"), h2], 1), c)
        u = self.up2(torch.cat([F.interpolate(u, scale_factor=2.0, mode="nearest"), h1], 1), c)
        k = self.kernels(c).view(b, 2, -1)
        heat = torch.einsum("bchw,bkc->bkhw", u, k[:, :, :-1]) + k[:, :, -1, None, None]
        pooled = [h3.mean((2, 3)), h3.amax((2, 3)), u.amax((2, 3))]
        done = self.done(torch.cat([*pooled, c], dim=-1)).squeeze(-1)
        return heat[:, 0], heat[:, 1], done


def pad_tokens(sequences: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad (L_i, dim) sequences into (B, L, dim) and the mask of real tokens."""
    length = max(len(t) for t in sequences)
    out = torch.zeros(len(sequences), length, sequences[0].shape[1])
    mask = torch.zeros(len(sequences), length, dtype=torch.bool)
    for i, t in enumerate(sequences):
        out[i, : len(t)] = t
        mask[i, : len(t)] = True
    return out, mask
