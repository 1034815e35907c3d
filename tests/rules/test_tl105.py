"""TL105 padding-without-truncation: precision guards beyond the rule document."""

from __future__ import annotations

import pytest

from tests.rules.conftest import lint as lint_project

CODE = "TL105"

HEADER = """
from transformers import AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")
texts = open("texts.txt").read().splitlines()
"""


def lint(tmp_path, line):
    return set(lint_project(tmp_path, {"m.py": HEADER + line + "\n"}, [CODE]))


@pytest.mark.parametrize("call", [
    'tokenizer(texts, padding=True, return_tensors="pt")',
    'tokenizer(texts, padding="longest", max_length=32)',
    'tokenizer(texts, padding="max_length", max_length=32, truncation=False)',
    'tokenizer(texts, padding="max_length", max_length=32, truncation="do_not_truncate")',
    'tokenizer(texts, pad_to_max_length=True, max_length=32)',
    'tokenizer.encode_plus(texts[0], padding="max_length", max_length=32)',
    'tokenizer.encode(texts[0], padding="max_length", max_length=32, return_tensors="pt")',
    'tokenizer.__call__(texts, padding=True, return_tensors="np")',
])
def test_padding_without_truncation_is_flagged(tmp_path, call):
    assert lint(tmp_path, f"enc = {call}") == {("m.py", 5, CODE)}


@pytest.mark.parametrize("call", [
    'tokenizer(texts, padding=True, truncation=True, return_tensors="pt")',
    'tokenizer(texts, padding=True, truncation="only_first", return_tensors="pt")',
    'tokenizer(texts, padding=True, truncation=1, return_tensors="pt")',
    'tokenizer(texts, padding=True, truncation=texts is not None, return_tensors="pt")',
    'tokenizer(texts, padding=False, max_length=32, return_tensors="pt")',
    'tokenizer(texts, padding="do_not_pad", return_tensors="pt")',
    'tokenizer(texts, padding=None, return_tensors="pt")',
    'tokenizer(texts, padding=True)',
    'tokenizer(texts, return_tensors="pt")',
    'tokenizer.pad({"input_ids": [[1, 2], [3]]}, padding=True, return_tensors="pt")',
    'tokenizer.decode([1, 2], padding=True, max_length=3)',
])
def test_truncating_or_unpadded_calls_are_clean(tmp_path, call):
    assert lint(tmp_path, f"enc = {call}") == set()


def test_a_local_wrapper_named_like_a_tokenizer_is_not_a_tokenizer_call(tmp_path):
    line = ("def tokenize(texts, **kwargs):\n    return tokenizer(texts, truncation=True, **kwargs)\n\n\n"
            'enc = tokenize(texts, padding=True, return_tensors="pt")')
    assert lint(tmp_path, line) == set()


def test_a_variable_assigned_from_a_tokenizer_class_is_recognised(tmp_path):
    src = """
        from transformers import GPT2TokenizerFast

        enc_fn = GPT2TokenizerFast.from_pretrained("gpt2")
        batch = enc_fn(open("t.txt").readlines(), padding=True, return_tensors="pt")
    """
    assert set(lint_project(tmp_path, {"m.py": src}, [CODE])) == {("m.py", 4, CODE)}


def test_tokens_and_other_token_words_are_not_tokenizers(tmp_path):
    src = """
        import torch

        tokens = torch.zeros(3)
        out = tokens(padding=True, max_length=3)
        ids = convert_tokens_to_ids(["a"], padding=True, return_tensors="pt")
    """
    assert set(lint_project(tmp_path, {"m.py": src}, [CODE])) == set()


def test_literal_prompts_images_and_test_files_are_clean(tmp_path):
    files = {
        "infer.py": """
            from transformers import AutoProcessor, AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained("gpt2")
            processor = AutoProcessor.from_pretrained("Salesforce/blip2-opt-2.7b")
            prompts = ["I would like to", "Hello, how are you"]
            a = tokenizer(prompts, padding=True, return_tensors="pt")
            b = tokenizer(["one", "two words"], padding=True, return_tensors="pt")
            c = processor(images=[1], padding="max_length", return_tensors="pt")
        """,
        "tests/test_model.py": """
            def test_batch(tokenizer, texts):
                assert tokenizer(texts, padding=True, return_tensors="pt")
        """,
    }
    assert set(lint_project(tmp_path, files, [CODE])) == set()
