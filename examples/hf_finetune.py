"""Fine-tune a tiny Llama (random weights, built from a config: no download) on CUDA.

A typical Hugging Face fine-tuning loop written for CUDA only: the model and
batches go to "cuda", autocast is pinned to "cuda", and the cache is emptied
with `torch.cuda.empty_cache()`. `neuron-check --fix` makes it device-agnostic.

    python examples/hf_finetune.py --steps 2
"""

import argparse

import torch
from transformers import AutoModelForCausalLM, LlamaConfig

VOCAB = 128


def make_model():
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4, intermediate_size=64,
                         max_position_embeddings=64)
    return AutoModelForCausalLM.from_config(config)


def make_batch(batch: int, length: int, generator: torch.Generator):
    start = torch.randint(0, VOCAB, (batch, 1), generator=generator)
    ids = (start + torch.arange(length)) % VOCAB
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}


def get_model_and_inputs():
    """The model and one batch (a dict of CPU tensors) for the runtime checker."""
    torch.manual_seed(0)
    return make_model(), make_batch(2, 16, torch.Generator().manual_seed(0))


def main(argv=None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=32)
    args = parser.parse_args(argv)

    torch.manual_seed(0)
    model = make_model().to("cuda")
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(0)
    loss = None
    for step in range(args.steps):
        batch = {k: v.cuda() for k, v in make_batch(args.batch, args.length, gen).items()}
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(**batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(f"step {step:3d}  loss {loss.item():.4f}")
    torch.cuda.empty_cache()
    print(f"final loss {loss.item():.4f} on {torch.cuda.device_count()} GPU(s)")
    return loss.item()


if __name__ == "__main__":
    main()
