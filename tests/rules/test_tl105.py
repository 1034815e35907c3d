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
    'tokenizer(texts, pad_to_max_length=True, return_tensors="pt")',
    'tokenizer(texts, pad_to_max_length=True, max_length=32, truncation=False)',
    'tokenizer.batch_encode_plus(texts, pad_to_max_length=True, max_length=32, truncation_strategy="do_not_truncate")',
    'tokenizer(texts, padding=True, max_length=32, truncation_strategy=False)',
    'tokenizer(texts, padding="max_length", max_length=32, truncation=None)',
    'tokenizer(texts, padding=True, return_tensors="pt")["input_ids"][:, 1:]',
    'tokenizer(texts, padding=True, return_tensors="pt").input_ids[:, :-1]',
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
    'tokenizer(texts, padding=True, return_tensors="pt", truncation=False)',
    'tokenizer.encode_plus(texts[0], max_length=32, pad_to_max_length=True, return_tensors="pt")',
    'tokenizer.batch_encode_plus(texts, max_length=32, pad_to_max_length=True)',
    'tokenizer.batch_encode_plus(texts, padding=True, max_length=32, truncation_strategy="longest_first")',
    'tokenizer(texts, padding=True, return_tensors="pt")["input_ids"][:, :32]',
    'tokenizer(texts, padding=True, return_tensors="pt").input_ids[:, -32:]',
    'tokenizer.encode(texts[0], padding="max_length", max_length=32, return_tensors="pt")[:32]',
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


def test_a_slice_of_the_output_later_in_the_function_is_truncation(tmp_path):
    src = """
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained("gpt2")


        def left_prompts(prompts, max_prompt_length):
            enc = tokenizer(prompts, padding=True, padding_side="left", return_tensors="pt")
            ids, mask = enc["input_ids"], enc["attention_mask"]
            if max_prompt_length is not None:
                ids, mask = ids[:, -max_prompt_length:], mask[:, -max_prompt_length:]
            return ids, mask


        def shifted(texts):
            enc = tokenizer(texts, padding=True, return_tensors="pt")
            ids = enc["input_ids"]
            return ids[:, :-1], ids[:, 1:]


        def another_name_sliced(texts, other, n):
            enc = tokenizer(texts, padding=True, return_tensors="pt")
            return enc, other[:n]
    """
    assert set(lint_project(tmp_path, {"m.py": src}, [CODE])) == {("m.py", 15, CODE), ("m.py", 21, CODE)}


def test_prompts_written_in_the_code_through_batching_are_literal(tmp_path):
    src = """
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained("gpt2")
        prompts = ["I would like to", "hello how are you", "roses are red and"]
        batches = [prompts[i : i + 2] for i in range(0, len(prompts), 2)]
        tokenized = [tokenizer(batch, padding=True, return_tensors="pt") for batch in batches]
        for batch in batches:
            enc = tokenizer(batch, padding=True, return_tensors="pt")
        read = [open(p).read() for p in prompts]
        other = tokenizer(read, padding=True, return_tensors="pt")
    """
    assert set(lint_project(tmp_path, {"m.py": src}, [CODE])) == {("m.py", 10, CODE)}


def test_a_vision_or_audio_processors_text_is_not_reported(tmp_path):
    src = """
        from transformers import AutoProcessor, AutoTokenizer

        processor = AutoProcessor.from_pretrained("Salesforce/blip2-opt-2.7b")
        tokenizer = AutoTokenizer.from_pretrained("gpt2")


        def collate(batch):
            text = processor.tokenizer([e["text"] for e in batch], padding=True, return_tensors="pt")
            both = processor(text=[e["q"] for e in batch], images=[e["image"] for e in batch], padding=True,
                             return_tensors="pt")
            plain = tokenizer([e["text"] for e in batch], padding=True, return_tensors="pt")
            return text, both, plain
    """
    assert set(lint_project(tmp_path, {"m.py": src}, [CODE])) == {("m.py", 11, CODE)}
