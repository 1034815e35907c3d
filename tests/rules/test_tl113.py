"""TL113 mask-padded-with-pad-id: precision guards beyond the rule document, and its fix."""

from __future__ import annotations

import pytest

from tests.fixutil import assert_fix
from tests.rules.conftest import expected, lint

CODE = "TL113"


def check(tmp_path, files):
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


@pytest.mark.parametrize(
    ("target", "value", "flagged"),
    [
        ("attention_mask", "tokenizer.pad_token_id", True),
        ("masks", "self.pad_idx", True),
        ("attn_mask", "PAD_ID", True),
        ("attention_mask", "pad", True),  # a local bound to the tokenizer's pad id
        ("attention_mask", "0", False),
        ("attention_mask", "ZERO_PAD_ID", False),  # known to be 0
        ("src_key_padding_mask", "tokenizer.pad_token_id", False),  # True = padding
        ("pad_mask", "PAD_ID", False),
        ("mask_token_ids", "tokenizer.pad_token_id", False),  # ids of mask tokens
        ("input_ids", "tokenizer.pad_token_id", False),
        ("attention_mask", "fill", False),  # not named a pad id
        ("label_mask", "tokenizer.pad_token_id", False),  # a label mask, not an attention mask
        ("attention_mask", "self.pad_token_label_id", False),  # the pad of labels (the ignore index)
    ],
)
def test_pad_sequence_targets_and_values(tmp_path, target, value, flagged):
    marker = "  # expect: TL113" if flagged else ""
    check(tmp_path, {"collate.py": f"""
        from torch.nn.utils.rnn import pad_sequence

        PAD_ID = 3
        ZERO_PAD_ID = 0

        class Collator:
            def __init__(self, tokenizer, fill=1):
                self.tokenizer = tokenizer
                self.pad_idx = tokenizer.pad_token_id
                self.fill = fill

            def __call__(self, rows):
                tokenizer, fill = self.tokenizer, self.fill
                pad = tokenizer.pad_token_id
                {target} = pad_sequence([r["x"] for r in rows], batch_first=True, padding_value={value}){marker}
                return {target}
    """})


def test_dict_key_names_the_mask(tmp_path):
    check(tmp_path, {"collate.py": """
        import torch.nn.functional as F

        def collate(rows, pad_token_id, width):
            return {
                "input_ids": [F.pad(r["input_ids"], (0, width - len(r["input_ids"])), value=pad_token_id) for r in rows],
                "attention_mask": [F.pad(r["m"], (0, width - len(r["m"])), value=pad_token_id) for r in rows],  # expect: TL113
            }
    """})


def test_list_padding_forms(tmp_path):
    check(tmp_path, {"features.py": """
        def features(ids, mask, width, tokenizer):
            pad_id = tokenizer.pad_token_id
            n = width - len(ids)
            ids = ids + [pad_id] * n
            mask.extend([pad_id] * n)  # expect: TL113
            other_mask = list(mask)
            other_mask += n * [pad_id]  # expect: TL113
            labels = [pad_id] * width
            return ids, mask, other_mask, labels
    """})


def test_fix_pads_with_zero(tmp_path):
    assert_fix(tmp_path, CODE, """\
        from torch.nn.utils.rnn import pad_sequence


        def collate(masks, tokenizer):
            attention_mask = pad_sequence(masks, batch_first=True, padding_value=tokenizer.pad_token_id)
            return attention_mask
    """, """\
        from torch.nn.utils.rnn import pad_sequence


        def collate(masks, tokenizer):
            attention_mask = pad_sequence(masks, batch_first=True, padding_value=0)
            return attention_mask
    """)


def test_masks_padded_as_ids_by_the_tokenizer(tmp_path):
    check(tmp_path, {"collate.py": """
        class Collator:
            def __init__(self, tokenizer):
                self.tokenizer = tokenizer

            def __call__(self, features):
                batch = self.tokenizer.pad({"input_ids": [f["input_ids"] for f in features]}, return_tensors="pt")
                batch["attention_mask"] = self.tokenizer.pad(  # expect: TL113
                    {"input_ids": [f["attention_mask"] for f in features]}, return_tensors="pt")["input_ids"]
                return batch
    """})
