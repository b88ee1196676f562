"""Draw plans and trajectories on top-down frames (for videos people would rather watch than read)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from PIL import Image, ImageDraw

ToPixel = Callable[[float, float], tuple[float, float]]
PLAN_COLOUR = (220, 40, 200)
TRAIL_COLOUR = (30, 110, 230)


def draw_plan(
    frame: np.ndarray,
    to_pixel: ToPixel,
    plan: Sequence[tuple[float, float]],
    trail: Sequence[tuple[float, float]] = (),
    current: int | None = None,
) -> np.ndarray:
    """A copy of ``frame`` with the plan's waypoints (magenta, the current one ringed) and the trail so far."""
    image = Image.fromarray(frame)
    draw = ImageDraw.Draw(image)
    if len(trail) > 1:
        draw.line([to_pixel(*p) for p in trail], fill=TRAIL_COLOUR, width=2)
    points = [to_pixel(*p) for p in plan]
    if len(points) > 1:
        draw.line(points, fill=PLAN_COLOUR, width=2)
    for k, (u, v) in enumerate(points):
        r = 6 if k == current else 3
        draw.ellipse(
            [u - r, v - r, u + r, v + r], outline=PLAN_COLOUR, fill=None if k == current else PLAN_COLOUR, width=2
        )
    return np.asarray(image)
