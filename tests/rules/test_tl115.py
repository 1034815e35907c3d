"""TL115 ignore-index-wrong-vocabulary: precision guards beyond the rule document, and its fix."""

from __future__ import annotations

import pytest

from tests.fixutil import assert_fix
from tests.rules.conftest import expected, lint

CODE = "TL115"


def check(tmp_path, files):
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


@pytest.mark.parametrize(
    ("ignore", "flagged"),
    [
        ("SRC_PAD_IDX", True),
        ("src_vocab['<pad>']", True),
        ("SRC.vocab.stoi[SRC.pad_token]", True),
        ("pad", True),  # a local bound to the source pad id
        ("TRG_PAD_IDX", False),
        ("-100", False),
        ("PAD_IDX", False),  # neutral: not judged
        ("SAME_SRC_PAD", False),  # known equal to the target pad id
    ],
)
def test_ignore_index_values(tmp_path, ignore, flagged):
    marker = "  # expect: TL115" if flagged else ""
    check(tmp_path, {"train.py": f"""
        import torch.nn as nn

        SAME_SRC_PAD = 3
        PAD_IDX = 0

        def criterion(SRC, TRG, src_vocab, trg_vocab):
            SRC_PAD_IDX = SRC.vocab.stoi[SRC.pad_token]
            TRG_PAD_IDX = 3
            pad = SRC_PAD_IDX
            return nn.CrossEntropyLoss(ignore_index={ignore}){marker}
    """})


def test_no_target_pad_id_in_the_file(tmp_path):
    check(tmp_path, {"train.py": """
        import torch.nn as nn

        def criterion(SRC):
            SRC_PAD_IDX = SRC.vocab.stoi[SRC.pad_token]
            return nn.CrossEntropyLoss(ignore_index=SRC_PAD_IDX)
    """})


def test_masks_by_side(tmp_path):
    check(tmp_path, {"model.py": """
        class Model:
            def __init__(self, src_pad_idx, trg_pad_idx):
                self.src_pad_idx, self.trg_pad_idx = src_pad_idx, trg_pad_idx

            def masks(self, src, trg, labels, src_tgt_ids):
                src_mask = src != self.src_pad_idx
                tgt_mask = trg != self.src_pad_idx  # expect: TL115
                label_mask = labels.eq(self.src_pad_idx)  # expect: TL115
                both = src_tgt_ids != self.src_pad_idx
                ok = trg != self.trg_pad_idx
                return src_mask, tgt_mask, label_mask, both, ok
    """})


def test_helper_parameters_take_the_side_of_their_call_sites(tmp_path):
    check(tmp_path, {"model.py": """
        class Model:
            def __init__(self, src_pad_idx, trg_pad_idx):
                self.src_pad_idx, self.trg_pad_idx = src_pad_idx, trg_pad_idx

            def source_only(self, seq):
                return seq.ne(self.src_pad_idx)

            def any_side(self, seq):
                return seq.ne(self.src_pad_idx)  # expect: TL115

            def forward(self, src, trg):
                return self.source_only(src), self.any_side(src), self.any_side(trg)
    """})


def test_fix_uses_the_target_name(tmp_path):
    assert_fix(tmp_path, CODE, """\
        import torch.nn as nn


        def criterion(SRC, TRG):
            SRC_PAD_IDX = SRC.vocab.stoi[SRC.pad_token]
            TRG_PAD_IDX = TRG.vocab.stoi[TRG.pad_token]
            return nn.CrossEntropyLoss(ignore_index=SRC_PAD_IDX), TRG_PAD_IDX
    """, """\
        import torch.nn as nn


        def criterion(SRC, TRG):
            SRC_PAD_IDX = SRC.vocab.stoi[SRC.pad_token]
            TRG_PAD_IDX = TRG.vocab.stoi[TRG.pad_token]
            return nn.CrossEntropyLoss(ignore_index=TRG_PAD_IDX), TRG_PAD_IDX
    """, unsafe=True)
