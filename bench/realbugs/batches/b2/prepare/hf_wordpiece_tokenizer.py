"""Write a tiny WordPiece (BERT-style) tokenizer folder: vocab.txt and tokenizer_config.json.

tlint-authored prepare helper for the runnable bench (bench/realbugs/batches/b2): it replaces a
BERT-family tokenizer that a case's script would otherwise download from a model hub. The
vocabulary is the special tokens, the pseudo-word syllables `hf_text_records.py` writes (and
their '##' continuations), lower-case letters, digits and common punctuation, so any text that
helper writes tokenizes without unknown tokens. `AutoTokenizer.from_pretrained(FOLDER)` loads it.

    python hf_wordpiece_tokenizer.py OUTDIR [--max-length 128]
"""
from __future__ import annotations

import argparse
import json
import string
from pathlib import Path

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
SYLLABLES = ["ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "de", "va", "zu", "he"]


def vocabulary() -> list[str]:
    chars = list(string.ascii_lowercase + string.digits + string.punctuation)
    pieces = SYLLABLES + ["##" + s for s in SYLLABLES] + chars + ["##" + c for c in string.ascii_lowercase]
    seen: dict[str, None] = dict.fromkeys(SPECIALS + pieces)
    return list(seen)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir")
    parser.add_argument("--max-length", type=int, default=128, help="model_max_length in the config")
    args = parser.parse_args(argv)
    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    vocab = vocabulary()
    (out / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    config = {"tokenizer_class": "BertTokenizer", "do_lower_case": True, "model_max_length": args.max_length,
              "pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]",
              "mask_token": "[MASK]"}
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    print(f"tiny wordpiece tokenizer: {len(vocab)} pieces in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
