"""Writing rollouts as videos (mp4 through imageio-ffmpeg's bundled ffmpeg, or gif)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np


def write_video(frames: Sequence[np.ndarray], path: str | Path, fps: float) -> Path:
    """Write RGB frames (H, W, 3) uint8 to ``path``; the suffix picks the format (.mp4 or .gif)."""
    import imageio.v2 as imageio

    path = Path(path)
    if not frames:
        raise ValueError(f"no frames to write to {path}")
    if path.suffix not in (".mp4", ".gif"):
        raise ValueError(f"video path must end in .mp4 or .gif, got {path.name!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".part" + path.suffix)
    if path.suffix == ".mp4":
        with imageio.get_writer(tmp, fps=fps, codec="libx264", quality=7, macro_block_size=16) as writer:
            for frame in frames:
                writer.append_data(frame)
    else:
        imageio.mimsave(tmp, list(frames), duration=1000.0 / fps, loop=0)
    tmp.replace(path)  # atomic: a reader never sees a half-written video
    return path
