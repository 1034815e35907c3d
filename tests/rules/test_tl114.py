"""TL114 training-loader-not-shuffled: precision guards beyond the rule document, and its fix."""

from __future__ import annotations

import pytest

from tests.fixutil import assert_fix, findings
from tests.rules.conftest import expected, lint

CODE = "TL114"


def check(tmp_path, files):
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


@pytest.mark.parametrize(
    ("arguments", "flagged"),
    [
        ("batch_size=8", True),
        ("batch_size=8, shuffle=False", False),  # written at the call: the author's stated choice
        ("batch_size=8, shuffle=SHUFFLE", True),  # a constant known False
        ("batch_size=8, shuffle=True", False),
        ("batch_size=8, shuffle=args.shuffle", False),  # unknown: trusted
        ("batch_size=8, sampler=sampler", False),
        ("batch_sampler=sampler", False),
        ("batch_size=8, sampler=None", True),
        ("**loader_kwargs", False),
    ],
)
def test_arguments(tmp_path, arguments, flagged):
    marker = "  # expect: TL114" if flagged else ""
    check(tmp_path, {"train.py": f"""
        from torch.utils.data import DataLoader

        SHUFFLE = False

        def build(train_set, sampler, args, loader_kwargs):
            train_loader = DataLoader(train_set, {arguments}){marker}
            return train_loader
    """})


@pytest.mark.parametrize(
    ("name", "flagged"),
    [("train_loader", True), ("trainloader", True), ("loader", False), ("testloader", False), ("val_loader", False),
     ("test_dataloader", False), ("train_eval_loader", False), ("dev_loader", False)],
)
def test_names_that_say_training(tmp_path, name, flagged):
    marker = "  # expect: TL114" if flagged else ""
    check(tmp_path, {"data.py": f"""
        from torch.utils.data import DataLoader

        def build(dataset):
            {name} = DataLoader(dataset, batch_size=8){marker}
            return {name}
    """})


def test_upstream_shuffles_silence_the_file(tmp_path):
    for i, shuffle in enumerate(["np.random.shuffle(rows)", "rows = rows[np.random.permutation(len(rows))]",
                                 "rows = ds.shuffle(seed=0)", "rows = df.sample(frac=1.0)",
                                 "rows, _ = random_split(ds, [0.9, 0.1])", "rows = rows[torch.randperm(len(rows))]"]):
        check(tmp_path / str(i), {"train.py": f"""
            import numpy as np
            import torch
            from torch.utils.data import DataLoader, random_split

            def build(rows, ds, df):
                {shuffle}
                train_loader = DataLoader(rows, batch_size=8)
                return train_loader
        """})


def test_iterable_and_ordered_datasets(tmp_path):
    check(tmp_path, {"train.py": """
        from datasets import load_dataset
        from torch.utils.data import DataLoader, Dataset, IterableDataset

        class Shards(IterableDataset):
            def __iter__(self):
                yield from range(4)

        class LocalShards(Shards):
            pass

        class Lines:
            def __iter__(self):
                yield from open("x.txt")

        class Rows(Dataset):
            def __len__(self):
                return 4

            def __getitem__(self, i):
                return i

        def build(windows):
            a = DataLoader(LocalShards(), batch_size=8)
            train_lines = DataLoader(Lines(), batch_size=8)
            hf = load_dataset("c4", split="train", streaming=True)
            train_hf = DataLoader(hf, batch_size=8)
            train_iter = DataLoader(load_dataset("c4", split="train").to_iterable_dataset(), batch_size=8)
            train_windows = DataLoader(windows, batch_size=8)
            train_rows = DataLoader(Rows(), batch_size=8)  # expect: TL114
            return a, train_lines, train_hf, train_iter, train_windows, train_rows
    """})


def test_iterated_by_the_training_loop_only(tmp_path):
    check(tmp_path, {"train.py": """
        import torch
        from torch.utils.data import DataLoader

        def fit(model, data, holdout, optimizer):
            loader = DataLoader(data, batch_size=8)  # expect: TL114
            other = DataLoader(holdout, batch_size=8)
            for batch in loader:
                model(batch).backward()
                optimizer.step()
                optimizer.zero_grad()
            with torch.no_grad():
                for batch in other:
                    model(batch)
    """})


def test_test_files_are_skipped(tmp_path):
    check(tmp_path, {"tests/test_data.py": """
        from torch.utils.data import DataLoader

        def test_loader(dataset):
            train_loader = DataLoader(dataset, batch_size=2)
            assert len(train_loader) == 1
    """})


def test_fix_passes_shuffle_true(tmp_path):
    assert_fix(tmp_path, CODE, """\
        from torch.utils.data import DataLoader


        def build(train_set):
            train_loader = DataLoader(train_set, batch_size=8)
            return train_loader
    """, """\
        from torch.utils.data import DataLoader


        def build(train_set):
            train_loader = DataLoader(train_set, batch_size=8, shuffle=True)
            return train_loader
    """, unsafe=True)


def test_random_access_and_stream_named_datasets(tmp_path):
    check(tmp_path, {"train.py": """
        import torch
        from torch.utils.data import DataLoader, Dataset

        class RandomWindows(Dataset):
            def __init__(self, data, seq_len):
                self.data, self.seq_len = data, seq_len

            def __getitem__(self, index):
                start = torch.randint(0, self.data.size(0) - self.seq_len, (1,))
                return self.data[start: start + self.seq_len]

            def __len__(self):
                return self.data.size(0) // self.seq_len

        def build(data, train_iterator):
            train_loader = DataLoader(RandomWindows(data, 64), batch_size=4)
            train_dataloader = DataLoader(train_iterator, batch_size=4)
            return train_loader, train_dataloader
    """})


def test_a_flag_defaulting_to_false_is_reported_without_a_fix(tmp_path):
    check(tmp_path, {"train.py": """
        from torch.utils.data import DataLoader

        def build(train_set, shuffle=False):
            train_loader = DataLoader(train_set, batch_size=8, shuffle=shuffle)  # expect: TL114
            return train_loader
    """})
    reported = findings(tmp_path, [CODE])
    assert [d.fix for d in reported] == [None]  # the flag's default is the author's to change


def test_synthetic_datasets(tmp_path):
    check(tmp_path, {"train.py": """
        import numpy as np
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        def build(n, t, features, token_ids):
            ids = torch.arange(1, n * t + 1).view(-1, t) + 100
            noise = torch.randn(n, 16).float() * 0.1
            labels = torch.randint(0, 2, (n,))
            train_a = DataLoader(TensorDataset(ids, labels), batch_size=4)
            train_b = DataLoader(TensorDataset(noise - 1.0), batch_size=4)
            train_c = DataLoader(torch.zeros(n, t).long(), batch_size=4)
            train_d = DataLoader(TensorDataset(ids, features), batch_size=4)  # expect: TL114
            train_e = DataLoader(TensorDataset(torch.tensor(np.load("x.npy"))), batch_size=4)  # expect: TL114
            train_f = DataLoader(TensorDataset(torch.tensor(token_ids)), batch_size=4)  # expect: TL114
            return train_a, train_b, train_c, train_d, train_e, train_f
    """})


THROUGHPUT_LOOP = """
    import torch
    from torch.utils.data import DataLoader
    from utils import PerformanceTracker, get_model_flops_per_token

    def main(model, dataset, optimizer, steps):
        dataloader = DataLoader(dataset, batch_size=1){marker}
        flops_per_token = get_model_flops_per_token(model)
        tracker = PerformanceTracker(warmup_steps=5)
        for step, batch in enumerate(dataloader):
            loss = model(**batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            metrics = tracker.step(batch["input_ids"].shape[1], {measure})
    {tail}
"""


@pytest.mark.parametrize(
    ("measure", "tail", "flagged"),
    [
        ("flops_per_token", "", False),
        ("tokens_per_sec", "", False),
        ("mfu", "", False),
        ("None", "", True),  # no throughput measure: a training run
        ("flops_per_token", "    model.eval()", True),  # it evaluates: training judged on quality
        ("flops_per_token", "    with torch.no_grad():\n            model(**batch)", True),
    ],
)
def test_throughput_runs(tmp_path, measure, tail, flagged):
    marker = "  # expect: TL114" if flagged else ""
    check(tmp_path, {"train.py": THROUGHPUT_LOOP.format(marker=marker, measure=measure, tail=tail)})
