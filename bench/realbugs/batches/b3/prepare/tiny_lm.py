"""Write a tiny randomly initialised causal language model (config + weights) into a tokenizer folder.

tlint-authored prepare helper for the runnable bench (bench/realbugs/batches/b3): it replaces a
model that a case's script would otherwise download from a model hub; the script loads it with its
own `from_pretrained(FOLDER)`. Run it after `chat_tokenizer.py FOLDER`: the vocabulary and the
pad / EOS / BOS ids are read from the tokenizer already there. Weights are random (fixed seed).

    python tiny_lm.py FOLDER [--arch llama|qwen2|gpt2] [--layers 2] [--hidden 32] [--heads 4] [--ctx 256]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--arch", default="llama", choices=["llama", "qwen2", "gpt2"])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--ctx", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    folder = Path(args.folder)
    tok_file = folder / "tokenizer.json"
    if not tok_file.exists():
        parser.error(f"{tok_file} not found: run chat_tokenizer.py {folder} first")
    tok = json.loads(tok_file.read_text(encoding="utf-8"))
    tok_config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    vocab = dict(tok["model"]["vocab"])
    for added in tok.get("added_tokens", []):
        vocab[added["content"]] = added["id"]
    size = max(vocab.values()) + 1
    ids = {key: vocab.get(tok_config.get(f"{key}_token") or "") for key in ("pad", "eos", "bos")}
    if args.arch == "gpt2":
        sizes = {"n_layer": args.layers, "n_embd": args.hidden, "n_head": args.heads, "n_positions": args.ctx}
    else:
        sizes = {"num_hidden_layers": args.layers, "hidden_size": args.hidden, "num_attention_heads": args.heads,
                 "num_key_value_heads": max(1, args.heads // 2), "intermediate_size": 2 * args.hidden,
                 "max_position_embeddings": args.ctx}
    config = AutoConfig.for_model(args.arch, vocab_size=size, pad_token_id=ids["pad"], eos_token_id=ids["eos"],
                                  bos_token_id=ids["bos"], tie_word_embeddings=False, **sizes)
    torch.manual_seed(args.seed)
    model = AutoModelForCausalLM.from_config(config)
    model.save_pretrained(folder)
    print(f"tiny {args.arch}: {sum(p.numel() for p in model.parameters())} parameters, vocab {size}, in {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
