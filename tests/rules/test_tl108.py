"""TL108 unpaired-shuffle: precision guards beyond the rule document."""

from __future__ import annotations

import pytest

from tests.rules.conftest import lint as lint_project

CODE = "TL108"


def lint(tmp_path, src):
    return set(lint_project(tmp_path, {"m.py": src}, [CODE]))


@pytest.mark.parametrize("body", [
    "np.random.shuffle(src)\n    np.random.shuffle(tgt)",
    "rng = random.Random(0)\n    rng.shuffle(questions)\n    rng.shuffle(answers)",
    "src = np.random.permutation(src)\n    tgt = np.random.permutation(tgt)",
    "i = torch.randperm(len(src))\n    j = torch.randperm(len(tgt))\n    src, tgt = src[i], tgt[j]",
])
def test_independent_shuffles_of_a_pair_are_flagged(tmp_path, body):
    src = f"import random\n\nimport numpy as np\nimport torch\n\n\ndef f(src, tgt, questions, answers):\n    {body}\n"
    got = lint(tmp_path, src)
    assert len(got) == 1


def test_names_zipped_together_are_a_pair(tmp_path):
    src = """
        import random


        def f(a, b):
            random.shuffle(a)
            random.shuffle(b)
            return list(zip(a, b))
    """
    assert lint(tmp_path, src) == {("m.py", 6, CODE)}


@pytest.mark.parametrize("body", [
    "random.shuffle(a)\n    random.shuffle(b)",
    "random.shuffle(texts)\n    random.shuffle(texts)",
    "idx = np.random.permutation(len(texts))\n    return texts[idx], labels[idx]",
])
def test_unrelated_or_jointly_shuffled_sequences_are_clean(tmp_path, body):
    src = f"import random\n\nimport numpy as np\n\n\ndef f(a, b, texts, labels):\n    {body}\n"
    assert lint(tmp_path, src) == set()


def test_shuffles_in_different_functions_are_not_compared(tmp_path):
    src = """
        import random


        def shuffle_x(x):
            random.shuffle(x)


        def shuffle_y(y):
            random.shuffle(y)
    """
    assert lint(tmp_path, src) == set()


def test_zipped_loaders_feeding_input_and_target(tmp_path):
    src = """
        from torch.utils.data import DataLoader


        def train(model, criterion, xs, ys):
            x_loader = DataLoader(xs, batch_size=8, shuffle=True)
            y_loader = DataLoader(ys, batch_size=8, shuffle=True)
            for i, (xb, yb) in enumerate(zip(x_loader, y_loader)):
                out = model(xb)
                criterion(out, yb).backward()
    """
    assert lint(tmp_path, src) == {("m.py", 7, CODE)}


def test_zipped_loaders_unshuffled_or_separate_terms_are_clean(tmp_path):
    src = """
        from torch.utils.data import DataLoader


        def train(model, criterion, xs, ys, a, b):
            x_loader = DataLoader(xs, batch_size=8)
            y_loader = DataLoader(ys, batch_size=8, shuffle=True)
            for xb, yb in zip(x_loader, y_loader):
                criterion(model(xb), yb).backward()
            for (x1, y1), (x2, y2) in zip(DataLoader(a, shuffle=True), DataLoader(b, shuffle=True)):
                loss = criterion(model(x1), y1) + criterion(model(x2), y2)
                loss.backward()
    """
    assert lint(tmp_path, src) == set()
