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
