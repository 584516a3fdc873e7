"""Input rules of the autoencoders, audio models and conditioning encoders whose forwards take
model-specific structures no generic rule reaches.

`CODEC_INPUTS` joins the per-class entries of `inputs.class_inputs`: a parameter an
entry names takes that value, before the docstring shapes (`docshapes.py`) and the generic rules
(`rules.py`). Most rules here name one parameter at a time (`PARAMETER_RULES`), so one rule serves
a codec's encode and decode alike. Each rule reads its sizes off the tiny model's config, never a
checkpoint's numbers, and says where the shapes come from (the pipeline that calls the class).
"""

from __future__ import annotations

from typing import Any, Callable

from conformance.models.diffusers.geometry import first_int

SEQUENCE = 16  # a plain sequence length of these models' inputs


def _randn(shape: tuple[int, ...], seed: int, name: str):
    from conformance.models.diffusers.rules import _name_seed, _randn

    return _randn(shape, _name_seed(seed, name))


def waveform_length(config: dict[str, Any], side: int) -> int:
    """A waveform long enough for a codec's STFT (several hops past one window) and its strides."""
    n_fft = first_int(config, ("n_fft", "enc_n_fft"), 0)
    hop = first_int(config, ("hop_length", "hop_size", "enc_hop_length"), 0)
    return max(side * side, 2 * n_fft, 16 * hop)


def _adapter_images(c: Any) -> dict[str, Any]:
    """MultiAdapter zips its input with its adapters: the adapter pipeline passes one control image
    per adapter, each at pixel size (the latent side x the adapter's downscale factor)."""
    g = c.g
    return {"xs": [c.randn(f"xs{i}", g.batch, a.config["in_channels"], g.side * a.config["downscale_factor"],
                           g.side * a.config["downscale_factor"]) for i, a in enumerate(c.model.adapters)]}


def _per_parameter(rule: Callable[[str, dict[str, Any], Any, int], list[Any] | None]) -> Callable[[Any], dict[str, Any]]:
    """A rule that names one parameter at a time, as a `pipeline_inputs.Context` entry: every
    parameter of the called function (forward, encode or decode) the rule names."""
    def inputs(c: Any) -> dict[str, Any]:
        found = {}
        for name in c.params:
            options = rule(name, c.config, c.g, c.seed)
            if options is not None:
                found[name] = options[0]
        return found
    return inputs


def _t5_film_decoder(name: str, config: dict[str, Any], g: Any, seed: int) -> list[Any] | None:
    """The spectrogram pipeline's two encoders (notes, continuous context) each give the decoder
    an (encoding, mask) pair at its model width."""
    import torch

    if name != "encodings_and_masks":
        return None
    pairs = [(_randn((g.batch, g.text_length, config["d_model"]), seed, f"{name}{i}"),
              torch.ones(g.batch, g.text_length)) for i in range(2)]
    return [pairs]


def _ace_step_tokenizer(name: str, config: dict[str, Any], g: Any, seed: int) -> list[Any] | None:
    """Acoustic latents cut into pooling windows, (B, patches, window, acoustic width), as its
    `tokenize` reshapes them before calling the forward."""
    if name != "hidden_states":
        return None
    window = config["pool_window_size"]
    return [_randn((g.batch, 2, window, config["audio_acoustic_hidden_dim"]), seed, name)]


def _ace_step_condition_encoder(name: str, config: dict[str, Any], g: Any, seed: int) -> list[Any] | None:
    """Reference-audio latents packed over the batch: one (T, timbre width) clip per reference and,
    beside them, the index of the batch item each belongs to (the pipeline packs one per item)."""
    import torch

    if name == "refer_audio_acoustic_hidden_states_packed":
        return [_randn((g.batch, SEQUENCE, config["timbre_hidden_dim"]), seed, name)]
    if name == "refer_audio_order_mask":
        return [torch.arange(g.batch)]
    if name == "lyric_hidden_states":
        return [_randn((g.batch, g.text_length, config["text_hidden_dim"]), seed, name)]
    return None


def _ace_step_transformer(name: str, config: dict[str, Any], g: Any, seed: int) -> list[Any] | None:
    """The noisy acoustic latents and the context latents are concatenated on channels before the
    patchify conv: together they make `in_channels`."""
    acoustic = config["audio_acoustic_hidden_dim"]
    if name == "hidden_states":
        return [_randn((g.batch, SEQUENCE, acoustic), seed, name)]
    if name == "context_latents":
        return [_randn((g.batch, SEQUENCE, config["in_channels"] - acoustic), seed, name)]
    return None


def _redux_image_encoder(name: str, config: dict[str, Any], g: Any, seed: int) -> list[Any] | None:
    """SigLIP image tokens at the Redux width (FluxPriorReduxPipeline feeds the vision tower's
    last hidden state)."""
    if name != "x":
        return None
    return [_randn((g.batch, SEQUENCE, config["redux_dim"]), seed, name)]


def _audioldm2_projection(name: str, config: dict[str, Any], g: Any, seed: int) -> list[Any] | None:
    """AudioLDM2's pipeline passes both text encoders' states (CLAP, then T5) with both masks: its
    forward calls `new_ones` with a tensor where one mask is missing."""
    import torch

    widths = {"hidden_states": config["text_encoder_dim"], "hidden_states_1": config["text_encoder_1_dim"]}
    if name in widths:
        return [_randn((g.batch, g.text_length, widths[name]), seed, name)]
    if name in ("attention_mask", "attention_mask_1"):
        return [torch.ones(g.batch, g.text_length, dtype=torch.long)]
    return None


def _single_video(name: str, config: dict[str, Any], g: Any, seed: int) -> list[Any] | None:
    """HunyuanVideo 1.5's VAE builds its causal attention mask as (batch, L, L) and SDPA broadcasts
    it against one head, so only one video at a time runs (its pipeline decodes one)."""
    if name != "x":
        return None
    return [_randn((1, config["in_channels"], g.frames, g.side, g.side), seed, name)]


def _mochi_video(name: str, config: dict[str, Any], g: Any, seed: int) -> list[Any] | None:
    """Mochi's encoder widens an RGB video with Fourier features to its `in_channels` (15): the
    sample itself has the decoder's `out_channels`."""
    if name != "x":
        return None
    return [_randn((g.batch, config["out_channels"], g.frames, g.side, g.side), seed, name)]


def _two_clips(name: str, config: dict[str, Any], g: Any, seed: int) -> list[Any] | None:
    """MiniMax-H3's VAE encodes `clip_length`-frame clips and drops `token_drop` latents of each;
    its decoder cross-fades consecutive clips, so a latent video it can decode spans two clips.
    Two latent pixels a side (reflect padding needs more than one) keep the two clips cheap."""
    if name != "x":
        return None
    side = 2 * config["spatial_compression_ratio"]
    return [_randn((g.batch, config["in_channels"], 2 * config["clip_length"], side, side), seed, name)]


def _stereo_waveform(name: str, config: dict[str, Any], g: Any, seed: int) -> list[Any] | None:
    """Cosmos 3's audio tokenizer takes `input_channels` per ear, doubled when `stereo`."""
    if name != "sample":
        return None
    channels = config["input_channels"] * (2 if config.get("stereo") else 1)
    return [_randn((g.batch, channels, waveform_length(config, g.side)), seed, name)]


def _patched_waveform(name: str, config: dict[str, Any], g: Any, seed: int) -> list[Any] | None:
    """SAME groups `patch_size` samples into channels, then strides over the patches: two latent
    frames need 2 x patch x every stride samples (its patch size is not an image's)."""
    import math

    if name != "sample":
        return None
    length = 2 * config["patch_size"] * math.prod(config["encoder_strides"])
    return [_randn((g.batch, config["audio_channels"], length), seed, name)]


def _mono_waveform(name: str, config: dict[str, Any], g: Any, seed: int) -> list[Any] | None:
    """MiniMax-H3's audio VAE takes a mono waveform, (B, 1, samples), two latent frames long (the
    product of its encoder strides per frame); its `latent_channels` are the latents'."""
    import math

    if name != "sample":
        return None
    return [_randn((g.batch, 1, 2 * math.prod(config["encoder_rates"])), seed, name)]


def _downsampled_waveform(name: str, config: dict[str, Any], g: Any, seed: int) -> list[Any] | None:
    """LongCat's audio VAE states one `downsampling_ratio` (2048) for its whole stride stack: two
    latent frames need twice that many samples (the generic geometry reads the ratio as an image's
    side and asks for its square)."""
    if name != "sample":
        return None
    return [_randn((g.batch, config["in_channels"], 2 * config["downsampling_ratio"]), seed, name)]


def _latent_video(name: str, config: dict[str, Any], g: Any, seed: int) -> list[Any] | None:
    """LTX-2's diffusion decoder takes the VAE's latent video (B, latent channels, T, H, W) and
    upsamples it 8x in time and 32x in space: a few latent pixels a side (at least the
    neighbourhood kernel) of two latent frames of one video keep its output small."""
    if name != "z":
        return None
    return [_randn((1, config["latent_channels"], 2, 3, 3), seed, name)]


ATOM_SLOTS = 37  # atom37: every residue's heavy atoms in fixed slots
BOND_TYPES = 10  # incident bond counts per atom slot, by bond type


def _protein_structure(name: str, config: dict[str, Any], g: Any, seed: int) -> list[Any] | None:
    """RFD4 Proteina's autoencoder encodes a prepared structure: atom37 coordinates in nanometres
    per token, the token types, the atom slots in use, and the preprocessor's per-atom topology
    (chain ids, incident bond counts, elements, charges, which tokens carry a latent and none given
    as in-context conditioning) its encoder features read. Tokens are the
    text length, the length the generic padding mask has."""
    import torch

    tokens = g.text_length
    generator = torch.Generator().manual_seed(seed)
    if name == "coords_nm":
        return [_randn((g.batch, tokens, ATOM_SLOTS, 3), seed, name)]
    if name == "ca_coors_nm":
        return [_randn((g.batch, tokens, 3), seed, name)]
    if name == "padding_mask":
        return [torch.ones(g.batch, tokens, dtype=torch.bool)]
    if name == "token_type":
        return [torch.zeros(g.batch, tokens, dtype=torch.long)]
    if name == "atom37_mask":
        return [torch.ones(g.batch, tokens, ATOM_SLOTS, dtype=torch.bool)]
    if name == "conditioning":
        return [{"chain_iid": torch.zeros(g.batch, tokens, dtype=torch.long),
                 "is_in_context_conditioning": torch.zeros(g.batch, tokens, dtype=torch.bool),
                 "supports_local_latent": torch.ones(g.batch, tokens, dtype=torch.bool),
                 "incident_bond_type_counts": torch.randint(0, 3, (g.batch, tokens, ATOM_SLOTS, BOND_TYPES),
                                                            generator=generator),
                 "ground_truth_element": torch.randint(1, 8, (g.batch, tokens, ATOM_SLOTS), generator=generator),
                 "charge": torch.zeros(g.batch, tokens, ATOM_SLOTS, dtype=torch.long)}]
    return None


REQUIRED_ATOM_ANNOTATIONS = ("hbond", "pistack", "pication", "saltbridge", "hydrophobic", "metal_coord")


def _protein_denoiser(name: str, config: dict[str, Any], g: Any, seed: int) -> list[Any] | None:
    """RFD4 Proteina's denoiser takes the noisy backbone (C-alpha coordinates) and local latents per
    token with one time each, and the preprocessor's topology: molecule, entity and index-group ids, token bond
    path lengths (pairs), which tokens carry a latent and which are in-context conditioning, and the
    per-atom interaction annotations its trunk requires (none present). The optional conditioning
    features it leaves unconditioned when absent."""
    import torch

    tokens = g.text_length
    if name == "bb_ca":
        return [_randn((g.batch, tokens, 3), seed, name)]
    if name == "local_latents":
        return [_randn((g.batch, tokens, config["latent_dim"]), seed, name)]
    if name in ("bb_ca_time", "local_latents_time"):  # (B,) in [0, 1]; the generic rules read a latent
        return [torch.tensor([0.25, 0.75])[: g.batch]]
    if name == "conditioning":
        from diffusers.models.transformers.transformer_rfd4_proteina import CONDITION_KEYS

        generator = torch.Generator().manual_seed(seed)
        # per-atom interaction annotations the trunk requires: all zero is a structure with none
        atoms = {CONDITION_KEYS[k]: torch.zeros(g.batch, tokens, ATOM_SLOTS, dtype=torch.long)
                 for k in REQUIRED_ATOM_ANNOTATIONS}
        return [{**atoms, "is_in_context_conditioning": torch.zeros(g.batch, tokens, dtype=torch.bool),
                 "supports_local_latent": torch.ones(g.batch, tokens, dtype=torch.bool),
                 "molecule_iid": torch.zeros(g.batch, tokens, dtype=torch.long),
                 "molecule_entity_id": torch.zeros(g.batch, tokens, dtype=torch.long),
                 CONDITION_KEYS["index_group"]: torch.zeros(g.batch, tokens, dtype=torch.long),
                 "token_bond_path_length": torch.randint(0, 4, (g.batch, tokens, tokens), generator=generator)}]
    if name in ("padding_mask", "token_type", "atom37_mask"):
        return _protein_structure(name, config, g, seed)
    return None


PARAMETER_RULES: dict[str, Callable[[str, dict[str, Any], Any, int], list[Any] | None]] = {
    "RFD4ProteinaTransformer": _protein_denoiser,
    "RFD4ProteinaAutoencoder": _protein_structure,
    "LTX2VideoDiffusionDecoderModel": _latent_video,
    "LongCatAudioDiTVae": _downsampled_waveform,
    "AutoencoderKLMiniMaxH3Audio": _mono_waveform,
    "Cosmos3AVAEAudioTokenizer": _stereo_waveform,
    "AutoencoderSAME": _patched_waveform,
    "AutoencoderKLMiniMaxH3": _two_clips,
    "AutoencoderKLHunyuanVideo15": _single_video,
    "AutoencoderKLMochi": _mochi_video,
    "AudioLDM2ProjectionModel": _audioldm2_projection,
    "T5FilmDecoder": _t5_film_decoder,
    "AceStepAudioTokenizer": _ace_step_tokenizer,
    "AceStepConditionEncoder": _ace_step_condition_encoder,
    "AceStepTransformer1DModel": _ace_step_transformer,
    "ReduxImageEncoder": _redux_image_encoder,
}

CODEC_INPUTS: dict[str, Callable[[Any], dict[str, Any]]] = {
    **{name: _per_parameter(rule) for name, rule in PARAMETER_RULES.items()},
    "MultiAdapter": _adapter_images,
}
