"""The tiny GPT-2 that the run-time overhead benchmarks train (bench/watch_overhead.py,
bench/trace_overhead.py): built from a config (no download), with 16 fixed batches of
random ids, so that both measure the same model the same way. Needs torch and
transformers."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser, *, heads: int, vocab: int) -> None:
    """The model's and the batches' sizes, as options of a benchmark's command line."""
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--heads", type=int, default=heads)
    parser.add_argument("--vocab", type=int, default=vocab)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--batch", type=int, default=8)


def model_and_data(args: argparse.Namespace, *, padded: bool):
    """The model and 16 batches; `padded`: right padding of random lengths (at least half
    the sequence), masked out of the labels with -100."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=args.vocab, n_positions=args.seq, n_embd=args.width, n_layer=args.layers,
                        n_head=args.heads, pad_token_id=0, bos_token_id=1, eos_token_id=1)
    model = GPT2LMHeadModel(config)
    gen = torch.Generator().manual_seed(1)
    data = []
    for _ in range(16):
        ids = torch.randint(1, args.vocab, (args.batch, args.seq), generator=gen)
        if not padded:
            data.append({"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids})
            continue
        lengths = torch.randint(args.seq // 2, args.seq + 1, (args.batch,), generator=gen)
        mask = (torch.arange(args.seq)[None, :] < lengths[:, None]).long()
        ids = ids * mask
        data.append({"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)})
    return model, data
