"""TL307 high-learning-rate: precision guards beyond the rule document."""

from __future__ import annotations

import pytest

from tests.rules.conftest import expected, lint

CODE = "TL307"

SCRATCH = """
    import torch
    import torch.nn as nn

    LR = {lr}
    model = nn.TransformerEncoder(nn.TransformerEncoderLayer(256, 4), 4)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR){marker}
"""


def check(tmp_path, files, config=None):
    assert lint(tmp_path, files, [CODE], config=config) == expected(files, CODE)


@pytest.mark.parametrize(("lr", "flagged"), [("3e-4", False), ("1e-3", False), ("2e-3", True)])
def test_scratch_threshold(tmp_path, lr, flagged):
    source = SCRATCH.replace("{lr}", lr).replace("{marker}", "  # expect: TL307" if flagged else "")
    check(tmp_path, {"train.py": source})


def test_option_reaches_the_rule(tmp_path):
    source = SCRATCH.replace("{lr}", "8e-4").replace("{marker}", "  # expect: TL307")
    check(tmp_path, {"train.py": source}, config="""
        [tool.tlint.rules.high-learning-rate]
        max-lr-scratch = 5e-4
    """)


def test_not_a_transformer(tmp_path):
    check(tmp_path, {"train.py": """
        import torch
        import torchvision

        model = torchvision.models.resnet50()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    """})


def test_sgd_is_not_judged(tmp_path):
    check(tmp_path, {"train.py": """
        import torch
        from transformers import AutoModel

        model = AutoModel.from_pretrained("bert-base-uncased")
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    """})


def test_pretrained_tokenizer_alone_is_scratch(tmp_path):
    check(tmp_path, {"train.py": """
        import torch
        import torch.nn as nn
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained("gpt2")
        model = nn.TransformerEncoder(nn.TransformerEncoderLayer(256, 4), 4)
        optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4)
    """})


@pytest.mark.parametrize(
    ("helper", "flagged"),
    [
        ("return d_model ** -0.5 * min((step + 1) ** -0.5, (step + 1) * warmup ** -1.5)", False),
        ("return inner(step, d_model, warmup)", False),  # two helpers deep
        ("return min(1.0, (step + 1) / warmup)", True),  # a ramp to 1: the literal is the peak rate
    ],
)
def test_lambda_into_a_helper(tmp_path, helper, flagged):
    marker = "  # expect: TL307" if flagged else ""
    check(tmp_path, {"train.py": f"""
        import torch
        import torch.nn as nn


        def inner(step, d_model, warmup):
            return d_model ** -0.5 * min((step + 1) ** -0.5, (step + 1) * warmup ** -1.5)


        def rate(step, d_model, warmup):
            {helper}


        model = nn.Transformer(d_model=512)
        optimizer = torch.optim.Adam(model.parameters(), lr=1.0){marker}
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: rate(step, 512, 4000))
    """})


FROZEN = """
    import torch
    import torch.nn as nn

    model = nn.TransformerEncoder(nn.TransformerEncoderLayer(256, 4), 4)
    model.load_state_dict(torch.load("base.pth"), strict=False)
    {freeze}
    optimizer = torch.optim.AdamW(model.parameters(), lr={lr}){marker}
"""


@pytest.mark.parametrize(("freeze", "lr", "flagged"), [
    ("mark_only_adapter_as_trainable(model)", "9e-3", False),
    ("lora.mark_only_lora_as_trainable(model, bias='none')", "9e-3", False),
    ("freeze_backbone(model)", "5e-3", False),
    ("model.layers.requires_grad_(False)", "1e-2", False),
    ("for p in model.parameters(): p.requires_grad = False", "9e-3", False),
    ("mark_only_adapter_as_trainable(model)", "2e-2", True),  # above the adapter ceiling too
    ("model.freeze()", "9e-3", True),  # no argument: not a helper freezing a model
    ("model.requires_grad_(True)", "9e-3", True),
    ("count_trainable_parameters(model)", "9e-3", True),
    ("pass", "9e-3", True),
])
def test_a_file_that_freezes_the_model_trains_adapters(tmp_path, freeze, lr, flagged):
    source = FROZEN.replace("{freeze}", freeze).replace("{lr}", lr).replace(
        "{marker}", "  # expect: TL307" if flagged else "")
    check(tmp_path, {"train.py": source})
