"""Write a synthetic instruction-tuning set as token rows, and a checkpoint folder for a config-built model.

tlint-authored prepare helper for the runnable bench (bench/realbugs/batches/b5). It replaces a
dataset and a checkpoint that a case's script would otherwise download and convert:

- DATA/train.pt and DATA/test.pt: a list of records {"input_ids": LongTensor, "labels": LongTensor},
  each a prompt followed by a response (up to 74 tokens); the labels copy the ids except over the prompt, where they
  hold the ignore value (--ignore, -1 by default), so only the response counts in the loss; the
  lengths vary, so batches are padded.
- CKPT/ (with --checkpoint CKPT): a word-level `tokenizer.json` over the same words (built with the
  `tokenizers` package), `tokenizer_config.json` naming its BOS / EOS tokens, an empty weights
  file `lit_model.pth` (no tensors: the script's model keeps its own random initialisation from
  its config) and `lit_config.json` naming the config.

    python instruct_token_rows.py DATA [--checkpoint CKPT] [--n 64] [--vocab 200] [--ignore -1] [--seed 0]
"""
from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

SPECIALS = ["<unk>", "<bos>", "<eos>", "<pad>"]


def _words(vocab: int) -> list[str]:
    return SPECIALS + [f"w{i}" for i in range(vocab - len(SPECIALS))]


def _records(rng: random.Random, n: int, vocab: int, ignore: int) -> list[dict]:
    import torch

    rows = []
    first = len(SPECIALS)
    for i in range(n):
        # the first record is the longest (prompt 48 + response 24 + 2), so that a script sizing its
        # context by the longest record has room for a sample generation's prompt as well
        n_prompt, n_response = (48, 24) if i == 0 else (rng.randint(8, 48), rng.randint(4, 24))
        prompt = [1] + [rng.randrange(first, vocab) for _ in range(n_prompt)]
        response = [rng.randrange(first, vocab) for _ in range(n_response)] + [2]
        ids = torch.tensor(prompt + response, dtype=torch.int64)
        labels = ids.clone()
        labels[: len(prompt)] = ignore
        rows.append({"input_ids": ids, "input_ids_no_response": ids[: len(prompt)].clone(), "labels": labels})
    return rows


def _checkpoint(folder: Path, vocab: int) -> None:
    import torch
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    folder.mkdir(parents=True, exist_ok=True)
    table = {word: i for i, word in enumerate(_words(vocab))}
    tokenizer = Tokenizer(WordLevel(vocab=table, unk_token="<unk>"))
    tokenizer.pre_tokenizer = Whitespace()
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>",
                    "tokenizer_class": "PreTrainedTokenizerFast"}), encoding="utf-8")
    (folder / "lit_config.json").write_text(json.dumps({"name": folder.name}), encoding="utf-8")
    torch.save({}, folder / "lit_model.pth")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data")
    parser.add_argument("--checkpoint")
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=200)
    parser.add_argument("--ignore", type=int, default=-1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.n < 2 or args.vocab <= len(SPECIALS) + 1:
        parser.error("--n must be >= 2 and --vocab > 5")

    import torch

    rng = random.Random(args.seed)
    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    torch.save(_records(rng, args.n, args.vocab, args.ignore), data / "train.pt")
    torch.save(_records(rng, max(2, args.n // 4), args.vocab, args.ignore), data / "test.pt")
    print(f"{args.n} training records, vocab {args.vocab}, in {data}")
    if args.checkpoint:
        _checkpoint(Path(args.checkpoint), args.vocab)
        print(f"tokenizer and empty weights in {args.checkpoint}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
