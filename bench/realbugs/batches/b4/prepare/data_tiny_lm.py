"""Write a tiny Hugging Face causal-LM folder (word-level tokenizer + random weights) for a case's script.

tlint-authored prepare helper for the runnable bench (bench/realbugs/batches/b4). It stands in for
a model and tokenizer that a case's script would otherwise download from a model hub; the script
loads both from FOLDER with its own unchanged `from_pretrained` calls. The tokenizer is word-level:
the special tokens first, then the words `w<i>` (whitespace-split), so the synthetic text written by
data_chat_json.py / data_text_json.py tokenises to known ids, one id per word. Weights are random
(fixed seed).

    python data_tiny_lm.py OUTDIR [--arch llama] [--vocab 512] [--layers 1] [--hidden 32] [--heads 2]
                          [--ctx 256] [--bos "<s>"] [--eos "</s>"] [--unk "<unk>"] [--pad ""] [--seed 0]

--pad "" writes a tokenizer with no pad token (the script under test decides what it pads with).
The special tokens may coincide, as in GPT-2-style tokenizers where one `<|endoftext|>` is BOS, EOS and
UNK (and often the pad): each distinct token gets one id, in the order unk, bos, eos, pad.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def build_tokenizer(vocab: int, specials: list[str], args: argparse.Namespace):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    table = {tok: i for i, tok in enumerate(specials)}
    for i in range(len(specials), vocab):
        table[f"w{i}"] = i
    core = Tokenizer(models.WordLevel(vocab=table, unk_token=args.unk))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.add_special_tokens(specials)  # split out of running text ("w9</s>" is w9 then </s>)
    kwargs = {"bos_token": args.bos, "eos_token": args.eos, "unk_token": args.unk}
    if args.pad:
        kwargs["pad_token"] = args.pad
    return PreTrainedTokenizerFast(tokenizer_object=core, **kwargs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir")
    parser.add_argument("--arch", default="llama", choices=["llama", "gpt2"])
    parser.add_argument("--vocab", type=int, default=512)
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--ctx", type=int, default=256)
    parser.add_argument("--bos", default="<s>")
    parser.add_argument("--eos", default="</s>")
    parser.add_argument("--unk", default="<unk>")
    parser.add_argument("--pad", default="")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    specials = list(dict.fromkeys(tok for tok in (args.unk, args.bos, args.eos, args.pad) if tok))
    if any(tok.startswith("w") and tok[1:].isdigit() for tok in specials):
        print("data_tiny_lm: a special token may not look like a word (w<digits>)", file=sys.stderr)
        return 2
    if args.vocab < len(specials) + 8:
        print(f"data_tiny_lm: --vocab must be at least {len(specials) + 8}", file=sys.stderr)
        return 2

    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(args.vocab, specials, args)
    tokenizer.save_pretrained(out)

    torch.manual_seed(args.seed)
    ids = {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id}
    if tokenizer.pad_token_id is not None:
        ids["pad_token_id"] = tokenizer.pad_token_id
    if args.arch == "llama":
        config = LlamaConfig(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=2 * args.hidden,
                             num_hidden_layers=args.layers, num_attention_heads=args.heads,
                             num_key_value_heads=args.heads, max_position_embeddings=args.ctx, **ids)
        model = LlamaForCausalLM(config)
    else:
        config = GPT2Config(vocab_size=args.vocab, n_embd=args.hidden, n_layer=args.layers, n_head=args.heads,
                            n_positions=args.ctx, **ids)
        model = GPT2LMHeadModel(config)
    model.save_pretrained(out)
    print(f"data_tiny_lm: {args.arch} with {sum(p.numel() for p in model.parameters())} parameters, "
          f"vocabulary {args.vocab}, written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
