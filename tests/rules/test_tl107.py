"""TL107 eos-masked-as-pad: precision guards beyond the rule document."""

from __future__ import annotations

import pytest

from tests.rules.conftest import lint as lint_project

CODE = "TL107"

SETUP = """
from transformers import AutoTokenizer, DataCollatorForLanguageModeling

tokenizer = AutoTokenizer.from_pretrained("gpt2")
{pad}
{masking}
"""


def lint(tmp_path, files):
    return set(lint_project(tmp_path, files, [CODE]))


@pytest.mark.parametrize("pad", [
    "tokenizer.pad_token = tokenizer.eos_token",
    "tokenizer.pad_token_id = tokenizer.eos_token_id",
    'tokenizer.add_special_tokens(dict(pad_token=tokenizer.eos_token))',
])
def test_pad_is_eos_spellings(tmp_path, pad):
    src = SETUP.format(pad=pad, masking="collator = DataCollatorForLanguageModeling(tokenizer=tokenizer, mlm=False)")
    assert lint(tmp_path, {"m.py": src}) == {("m.py", 4, CODE)}


@pytest.mark.parametrize("masking", [
    "collator = DataCollatorForLanguageModeling(tokenizer)",
    "collator = DataCollatorForLanguageModeling(tokenizer, mlm=True)",
    "collator = None",
    "loss_ignore = -100",
])
def test_no_masking_by_pad_id_is_clean(tmp_path, masking):
    src = SETUP.format(pad="tokenizer.pad_token = tokenizer.eos_token", masking=masking)
    assert lint(tmp_path, {"m.py": src}) == set()


def test_model_config_pad_id_is_not_the_tokenizer(tmp_path):
    src = SETUP.format(pad="model.config.pad_token_id = model.config.eos_token_id",
                       masking="collator = DataCollatorForLanguageModeling(tokenizer, mlm=False)")
    assert lint(tmp_path, {"m.py": src}) == set()


def test_masking_in_an_unrelated_file_is_not_seen(tmp_path):
    files = {
        "setup/tok.py": SETUP.format(pad="tokenizer.pad_token = tokenizer.eos_token", masking=""),
        "other/collate.py": SETUP.format(pad="", masking="c = DataCollatorForLanguageModeling(tokenizer, mlm=False)"),
    }
    assert lint(tmp_path, files) == set()


def test_a_distinct_pad_in_an_imported_file_silences_it(tmp_path):
    files = {
        "tok.py": SETUP.format(pad='tokenizer.pad_token = tokenizer.eos_token', masking=""),
        "train.py": """
            from transformers import DataCollatorForLanguageModeling

            from tok import tokenizer

            tokenizer.add_special_tokens({"pad_token": "<pad>"})
            collator = DataCollatorForLanguageModeling(tokenizer, mlm=False)
        """,
    }
    assert lint(tmp_path, files) == set()
    files["train.py"] = files["train.py"].replace('tokenizer.add_special_tokens({"pad_token": "<pad>"})', "")
    assert lint(tmp_path / "again", files) == {("tok.py", 4, CODE)}
