"""TL110 nan-unchecked-input: precision guards beyond the rule document."""

from __future__ import annotations

import pytest

from tests.rules.conftest import lint as lint_project

CODE = "TL110"

LOAD = """
import pandas as pd
import torch


def load(path):
    df = pd.read_csv(path)
    {extra}
    return torch.tensor(df.values)
"""


def lint(tmp_path, src):
    return set(lint_project(tmp_path, {"m.py": src}, [CODE]))


def test_a_read_reaching_a_tensor_is_flagged(tmp_path):
    assert lint(tmp_path, LOAD.format(extra="pass")) == {("m.py", 6, CODE)}


@pytest.mark.parametrize("extra", [
    "df = df.dropna()",
    "df.fillna(0, inplace=True)",
    "df = df.interpolate()",
    "assert not df.isna().any().any()",
    "assert torch.isfinite(torch.tensor(df.values)).all()",
    "df = pd.DataFrame(SimpleImputer().fit_transform(df))",
])
def test_nan_handling_anywhere_in_the_module_is_clean(tmp_path, extra):
    src = LOAD.format(extra=extra)
    if "SimpleImputer" in extra:
        src = "from sklearn.impute import SimpleImputer\n" + src
    assert lint(tmp_path, src) == set()


def test_data_that_never_reaches_a_tensor_is_clean(tmp_path):
    src = """
        import pandas as pd
        import torch


        def describe(path):
            df = pd.read_csv(path)
            return df.describe()


        def zeros(n):
            return torch.tensor([0.0] * n)
    """
    assert lint(tmp_path, src) == set()


def test_a_variable_of_the_same_name_in_another_function_is_not_the_data(tmp_path):
    src = """
        import pandas as pd
        import torch


        def stats(path):
            data = pd.read_csv(path)
            return data.mean()


        def batch(data):
            return torch.tensor(data)
    """
    assert lint(tmp_path, src) == set()


def test_np_load_and_integer_tensors_are_clean(tmp_path):
    src = """
        import numpy as np
        import pandas as pd
        import torch


        def load(path):
            feats = torch.from_numpy(np.load(path + ".npy"))
            labels = pd.read_csv(path + ".csv")
            return feats, torch.tensor(labels["label"].values, dtype=torch.long)
    """
    assert lint(tmp_path, src) == set()


DATA_MODULE = """
    import torch
    from torch.utils.data import Dataset


    class Rows(Dataset):
        def __init__(self, name, frame):
            self.name = name
            self.values = frame.to_numpy()

        def __getitem__(self, i):
            return torch.tensor(self.values[i])


    def to_tensor(frame):
        return torch.from_numpy(frame.values).float()
    {extra}
"""


@pytest.mark.parametrize(("call", "reported"), [
    ('Rows("train", pd.read_csv(path))', True),
    ('Rows(frame=pd.read_csv(path), name="train")', True),
    ("to_tensor(pd.read_csv(path))", True),
    ('Rows(pd.read_csv(path), None)', False),  # the read goes to `name`, which is never a tensor
    ('Rows("train", pd.read_csv(path, dtype="int64"))', False),
    ("train_test_split(pd.read_csv(path))", False),  # a library function: no facts
])
def test_a_read_passed_to_an_imported_dataset_or_function(tmp_path, call, reported):
    train = f"""
        import pandas as pd
        from sklearn.model_selection import train_test_split

        from data import Rows, to_tensor


        def build(path):
            return {call}
    """
    got = set(lint_project(tmp_path, {"data.py": DATA_MODULE.format(extra=""), "train.py": train}, [CODE]))
    assert got == ({("train.py", 8, CODE)} if reported else set())


@pytest.mark.parametrize(("data_extra", "train_extra"), [
    ("assert not torch.isnan(torch.zeros(1)).any()", ""),  # the tensorizing module checks for NaN
    ("", "frame = frame.fillna(0)"),  # the reading module fills
])
def test_nan_handling_in_either_module_is_enough(tmp_path, data_extra, train_extra):
    train = f"""
        import pandas as pd

        from data import Rows


        def build(path):
            frame = pd.read_csv(path)
            {train_extra}
            return Rows("train", frame)
    """
    files = {"data.py": DATA_MODULE.format(extra=data_extra), "train.py": train}
    assert set(lint_project(tmp_path, files, [CODE])) == set()


def test_a_read_passed_to_a_dataset_of_the_same_file_is_flagged(tmp_path):
    src = """
        import pandas as pd
        import torch
        from torch.utils.data import Dataset


        class Rows(Dataset):
            def __init__(self, frame):
                self.frame = frame

            def __getitem__(self, i):
                return torch.tensor(self.frame.iloc[i].values)


        def read(path):
            return pd.read_csv(path)


        def build(path):
            return Rows(read(path))
    """
    assert set(lint_project(tmp_path, {"m.py": src}, [CODE])) == {("m.py", 15, CODE)}


def test_files_that_do_not_import_each_other_are_not_paired(tmp_path):
    train = """
        import pandas as pd

        from helpers import Rows


        def build(path):
            return Rows("train", pd.read_csv(path))
    """
    files = {"data.py": DATA_MODULE.format(extra=""), "train.py": train, "helpers.py": "Rows = None\n"}
    assert set(lint_project(tmp_path, files, [CODE])) == set()
