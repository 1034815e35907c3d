"""TL111 pad-to-max-length: precision guards beyond the rule document."""

from __future__ import annotations

from tests.rules.conftest import lint as lint_project

CODE = "TL111"

TOKENIZE = """
def tokenize(tokenizer, texts):
    return tokenizer(texts, padding="max_length", truncation=True, max_length=128)
"""
LOADER = """
from torch.utils.data import DataLoader

from data import tokenize


def loader(tokenizer, texts):
    return DataLoader(tokenize(tokenizer, texts)["input_ids"], batch_size=8)
"""


def lint(tmp_path, files):
    return set(lint_project(tmp_path, files, [CODE]))


def test_a_loader_in_an_importing_file_counts(tmp_path):
    assert lint(tmp_path, {"data.py": TOKENIZE, "train.py": LOADER}) == {("data.py", 2, CODE)}


def test_nothing_feeds_training_without_a_loader_or_trainer(tmp_path):
    assert lint(tmp_path, {"data.py": TOKENIZE}) == set()


def test_xla_anywhere_in_the_import_chain_silences_it(tmp_path):
    files = {"data.py": TOKENIZE, "train.py": "import torch_xla.core.xla_model as xm\n" + LOADER.lstrip("\n")}
    assert lint(tmp_path, files) == set()


def test_other_padding_strategies_and_test_files_are_clean(tmp_path):
    files = {
        "data.py": """
            from torch.utils.data import DataLoader


            def loader(tokenizer, texts, strategy):
                a = tokenizer(texts, padding=True, truncation=True)
                b = tokenizer(texts, padding=strategy, truncation=True, max_length=64)
                c = tokenizer(texts, pad_to_max_length=False, truncation=True, max_length=64)
                return DataLoader(a["input_ids"] + b["input_ids"] + c["input_ids"])
        """,
        "tests/test_data.py": """
            from torch.utils.data import DataLoader


            def test_loader(tokenizer):
                enc = tokenizer(["a"], padding="max_length", truncation=True, max_length=8)
                assert len(DataLoader(enc["input_ids"])) == 1
        """,
    }
    assert lint(tmp_path, files) == set()


def test_info_findings_do_not_fail_the_run(tmp_path):
    from tests.lintutil import lint_paths, write_tree

    write_tree(tmp_path, {"data.py": TOKENIZE.lstrip("\n"), "train.py": LOADER.lstrip("\n")})
    result = lint_paths([tmp_path], select=[CODE])
    assert [d.severity for d in result.diagnostics] == ["info"]
