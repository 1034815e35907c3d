"""Write a tiny word-level fast tokenizer (tokenizer.json, tokenizer_config.json) with a chat template.

tlint-authored prepare helper for the runnable bench (bench/realbugs/batches/b3): it replaces a
tokenizer that a case's script would otherwise download from a model hub, so that
`AutoTokenizer.from_pretrained(FOLDER)` loads it. The vocabulary is the special tokens, the chat
roles, punctuation, digits and the synthetic words of `_words.py`; text splits on whitespace and
punctuation. The chat template (ChatML-like, jinja) ends every turn with the end-of-turn token,
which is also the EOS token unless --eos says otherwise.

    python chat_tokenizer.py OUTDIR [--words 200] [--eos "<|im_end|>"] [--no-template] [--bos]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from _words import DIGITS, PUNCT, ROLES, words

TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir")
    parser.add_argument("--words", type=int, default=200, help="number of synthetic words in the vocabulary")
    parser.add_argument("--eos", default="<|im_end|>", help="EOS token: <|im_end|> (default) or <|endoftext|>")
    parser.add_argument("--no-template", action="store_true", help="write no chat template")
    parser.add_argument("--bos", action="store_true", help="declare <|bos|> as the BOS token")
    args = parser.parse_args(argv)

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    specials = ["<|pad|>", "<|unk|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|bos|>"]
    vocab: dict[str, int] = {}
    for tok in specials + ROLES + PUNCT + DIGITS + words(args.words):
        vocab.setdefault(tok, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<|unk|>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.add_special_tokens(specials)
    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 512,
        "pad_token": "<|pad|>",
        "unk_token": "<|unk|>",
        "eos_token": args.eos,
        "bos_token": "<|bos|>" if args.bos else None,
        "padding_side": "right",
        "clean_up_tokenization_spaces": False,
    }
    if not args.no_template:
        config["chat_template"] = TEMPLATE
        (out / "chat_template.jinja").write_text(TEMPLATE, encoding="utf-8")
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    (out / "special_tokens_map.json").write_text(
        json.dumps({k: v for k, v in config.items() if k.endswith("_token") and v}, indent=1), encoding="utf-8")
    print(f"chat tokenizer: {len(vocab)} tokens in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
