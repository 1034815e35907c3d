"""TL308 adam-eps-underflow: precision guards beyond the rule document."""

from __future__ import annotations

import pytest

from tests.rules.conftest import expected, lint

CODE = "TL308"


def check(tmp_path, files):
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


@pytest.mark.parametrize(
    ("optimizer", "flagged"),
    [
        ("torch.optim.Adam(model.parameters())", True),
        ("torch.optim.Adam(model.parameters(), 1e-4, (0.9, 0.98), 1e-9)", True),
        ("torch.optim.Adam(model.parameters(), eps=1e-7)", False),
        ("torch.optim.SGD(model.parameters(), lr=0.1)", False),
        ("torch.optim.AdamW(model.parameters(), eps=config.eps)", False),
    ],
)
def test_eps_values(tmp_path, optimizer, flagged):
    marker = "  # expect: TL308" if flagged else ""
    check(tmp_path, {"train.py": f"""
        import torch


        def setup(model, config):
            model.half()
            return {optimizer}{marker}
    """})


def test_cast_in_another_function(tmp_path):
    check(tmp_path, {"train.py": """
        import torch


        def export(model):
            return model.half()


        def setup(model):
            return torch.optim.AdamW(model.parameters(), lr=1e-4)
    """})


def test_input_cast_is_not_a_parameter_cast(tmp_path):
    check(tmp_path, {"train.py": """
        import torch


        def setup(model, x):
            x = x.half()
            return torch.optim.AdamW(model.parameters(), lr=1e-4)
    """})


def test_peft_upcasts_adapters(tmp_path):
    check(tmp_path, {"train.py": """
        import torch
        from peft import LoraConfig, get_peft_model
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained("gpt2", torch_dtype=torch.float16)
        model = get_peft_model(model, LoraConfig(r=8))
        optimizer = torch.optim.AdamW(model.parameters(), lr=2e-4)
    """})
