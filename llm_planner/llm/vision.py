"""Chat messages with images, for OpenAI-compatible vision servers (vLLM, Ollama, llama.cpp's ``llama-server``
with a vision projector, hosted APIs).

An image travels as a content part ``{"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}``
beside ``{"type": "text", "text": ...}`` parts of the same user message (the OpenAI chat-completions form every
one of those servers reads). PNG is lossless, so the model sees exactly the pixels the camera rendered.

:class:`OpenAIVisionBackend` is the ``openai`` backend (same client, retries, timeouts, ``response_format`` and
errors) that also accepts such messages; the text backends keep refusing anything but text content.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import numpy as np

from llm_planner.llm.backend import LLMError, check_text
from llm_planner.llm.openai_backend import OpenAIBackend

PNG_DATA_URL = "data:image/png;base64,"
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def check_rgb(image: Any, size: int | None = None, what: str = "image") -> np.ndarray:
    """``image`` if it is an RGB picture, (h, w, 3) ``uint8`` (``size`` x ``size`` when given); ValueError/TypeError
    naming what it is and how to make it one otherwise."""
    if not isinstance(image, np.ndarray):
        raise TypeError(f"{what} must be a numpy array (h, w, 3) of uint8, got {type(image).__name__}")
    if image.dtype != np.uint8:
        fix = (
            "scale to 0..255 and convert: (image * 255).round().astype(np.uint8)"
            if image.dtype.kind == "f"
            else "convert it: image.astype(np.uint8) after clipping to 0..255"
        )
        raise ValueError(f"{what} has dtype {image.dtype}, not uint8 (RGB, 0..255); {fix}")
    if image.ndim != 3 or image.shape[2] != 3:
        fix = (
            "drop the alpha channel: image[..., :3]"
            if image.ndim == 3 and image.shape[2] == 4
            else "give an (h, w, 3) RGB array (a grey image: np.repeat(image[..., None], 3, axis=2))"
        )
        raise ValueError(f"{what} has shape {image.shape}, not (h, w, 3) RGB; {fix}")
    if size is not None and image.shape[:2] != (size, size):
        raise ValueError(
            f"{what} is {image.shape[1]}x{image.shape[0]} pixels, not the {size}x{size} asked for; render it at "
            f"size={size} (or set image_size to the camera's size)"
        )
    return image


def png_bytes(image: np.ndarray) -> bytes:
    """The image (checked by :func:`check_rgb`) as PNG."""
    import imageio.v3 as iio

    return bytes(iio.imwrite("<bytes>", check_rgb(image), extension=".png"))


def image_part(image: np.ndarray) -> dict[str, Any]:
    """An ``image_url`` content part holding the image as a base64 PNG data URL."""
    url = PNG_DATA_URL + base64.b64encode(png_bytes(image)).decode("ascii")
    return {"type": "image_url", "image_url": {"url": url}}


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def decode_image_part(part: dict[str, Any]) -> np.ndarray:
    """The picture of an ``image_url`` part made by :func:`image_part` (what a server decodes), (h, w, 3) uint8."""
    import imageio.v3 as iio

    url = part["image_url"]["url"]
    if not url.startswith(PNG_DATA_URL):
        raise ValueError(f"not a PNG data URL: {url[:40]!r}")
    return np.asarray(iio.imread(base64.b64decode(url[len(PNG_DATA_URL) :]), extension=".png"))


def check_vision_messages(messages: list[dict[str, Any]]) -> None:
    """LLMError unless every message's content is text (as :func:`~llm_planner.llm.backend.check_messages`) or a
    non-empty list of ``text`` parts (UTF-8 text) and ``image_url`` parts (base64 PNG data URLs)."""
    for i, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            check_text(content, f"message {i} ({message.get('role')})")
            continue
        if not isinstance(content, list):
            raise LLMError(f"message {i} must be a mapping with text or a list of content parts, got {message!r:.80}")
        if not content:
            raise LLMError(f"message {i} has an empty list of content parts")
        for j, part in enumerate(content):
            where = f"message {i} ({message.get('role')}), part {j}"
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text" and isinstance(part.get("text"), str):
                check_text(part["text"], where)
            elif kind == "image_url" and isinstance(part.get("image_url"), dict):
                _check_png_url(part["image_url"].get("url"), where)
            else:
                raise LLMError(
                    f"{where} must be {{'type': 'text', 'text': ...}} or {{'type': 'image_url', 'image_url': "
                    f"{{'url': 'data:image/png;base64,...'}}}}, got {part!r:.80}"
                )


def _check_png_url(url: Any, where: str) -> None:
    if not isinstance(url, str) or not url.startswith(PNG_DATA_URL):
        raise LLMError(f"{where}: an image must be a {PNG_DATA_URL}... URL (llm_planner.llm.vision.image_part)")
    try:
        head = base64.b64decode(url[len(PNG_DATA_URL) : len(PNG_DATA_URL) + 12], validate=True)
    except (binascii.Error, ValueError):
        head = b""
    if not head.startswith(_PNG_MAGIC):
        raise LLMError(f"{where}: the data URL does not hold a PNG (it starts with {head[:8]!r})")


class OpenAIVisionBackend(OpenAIBackend):
    """The ``openai`` backend for servers that see: messages may carry image parts (see the module docstring)."""

    name = "openai_vision"
    check = staticmethod(check_vision_messages)
