"""A Diffusers model class's family (what the report groups by) and modality (the rank of its
samples), derived from its name, its module path and its default config; a small table settles
the classes no rule reads right.

Families: image, video, audio, world-model, autoencoder, controlnet, adapter, other. An autoencoder,
ControlNet or adapter also has a modality (image, video or audio), which sets its inputs' rank.
"""

from __future__ import annotations

import re
from typing import Any

FAMILIES = ("image", "video", "audio", "world-model", "autoencoder", "controlnet", "adapter", "other")
MODALITIES = ("image", "video", "audio")

# Checked in order: the first rule whose pattern matches the class name (or its module path) wins.
_ROLE_RULES: tuple[tuple[str, re.Pattern], ...] = (
    ("controlnet", re.compile(r"ControlNet|controlnet")),
    ("autoencoder", re.compile(r"^Autoencoder|VAE|Vae$|^VQModel$|Tokenizer$|Detokenizer$|autoencoders")),
    ("adapter", re.compile(r"Adapter$")),
    ("world-model", re.compile(r"^Cosmos|^SanaWM")),
)
_MODALITY_RULES: tuple[tuple[str, re.Pattern], ...] = (
    ("audio", re.compile(r"Audio|Music|Vocoder|1D|Oobleck|audio|T5Film")),
    ("video", re.compile(r"3D|Video|video|Temporal|Motion|Wan|I2VGen|Cosmos|SanaWM|Magvit|Mochi|Allegro|Latte|"
                         r"Kandinsky[56]|AnyFlow|Helios|ChronoEdit|SkyReels|EasyAnimate|MiniMaxH3|^SparseControlNet")),
)
# Classes whose name and config say nothing of what they generate: class -> (family, modality).
TABLE: dict[str, tuple[str, str]] = {
    "PriorTransformer": ("other", "image"),  # unCLIP's text-to-image-embedding prior
    "CLIPImageProjection": ("other", "image"),
    "ReduxImageEncoder": ("other", "image"),
    "StableAudioProjectionModel": ("other", "audio"),
    "StableAudio3DurationEmbedder": ("other", "audio"),
    "AudioLDM2ProjectionModel": ("other", "audio"),
    "AceStepConditionEncoder": ("other", "audio"),
    "MiniMaxMusic3ConditionEncoder": ("other", "audio"),
    "UniDiffuserTextDecoder": ("other", "image"),
    "AnimaTextConditioner": ("other", "image"),
    "Ideogram4PromptEnhancerHead": ("other", "image"),
    "RFD4ProteinaTransformer": ("other", "image"),  # protein structure generation
    "RFD4ProteinaAutoencoder": ("autoencoder", "image"),
    "Kandinsky6SRLatentUpscalerBank": ("other", "video"),
    "MiniMaxMusic3RVQDepthDecoder": ("audio", "audio"),
}


def modality_of(class_name: str, module: str) -> str:
    if class_name in TABLE:
        return TABLE[class_name][1]
    for modality, pattern in _MODALITY_RULES:
        if pattern.search(class_name) or pattern.search(module.rsplit(".", 1)[-1]):
            return modality
    return "image"


def family_of(class_name: str, module: str, config: dict[str, Any]) -> str:
    """The family: a role (ControlNet, autoencoder, adapter, world model) first, else the modality
    it generates; a generator of neither samples nor latents is `other`."""
    if class_name in TABLE:
        return TABLE[class_name][0]
    for family, pattern in _ROLE_RULES:
        if pattern.search(class_name) or pattern.search(module):
            return family
    if not _generates(class_name, config):
        return "other"
    return modality_of(class_name, module)


def _generates(class_name: str, config: dict[str, Any]) -> bool:
    """A denoiser takes samples in and puts them out: it has input channels (or a patch size)."""
    return any(key in config for key in ("in_channels", "patch_size", "in_visual_dim", "io_channels",
                                         "in_dim", "input_channels")) or "Transformer" in class_name \
        or "UNet" in class_name
