"""TL207 missing-causal-mask and the shared causal evidence: precision guards."""

from __future__ import annotations

from tests.rules.conftest import expected, lint

CODE = "TL207"

NAMED_MODEL = """
    import torch.nn as nn
    import torch.nn.functional as F


    class {name}(nn.Module):
        def __init__(self, vocab, d=64):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(128, d)
            self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, 4, batch_first=True), 2)
            self.head = nn.Linear(d, vocab)

        def forward(self, ids, positions, targets):
            h = self.encoder(self.emb(ids) + self.pos(positions)){mark}
            logits = self.head(h)
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
"""


def test_a_causal_name_with_a_vocabulary_loss_is_causal(tmp_path):
    files = {"m.py": NAMED_MODEL.format(name="TinyGPT", mark="  # expect: TL207")}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_a_neutral_name_is_not_causal(tmp_path):
    files = {"m.py": NAMED_MODEL.format(name="Tagger", mark="")}
    assert lint(tmp_path, files, [CODE]) == []


def test_causal_names_option_reaches_the_evidence(tmp_path):
    files = {"m.py": NAMED_MODEL.format(name="Tagger", mark="  # expect: TL207")}
    config = """
        [tool.tlint]
        causal-names = ["Tagger"]
    """
    assert lint(tmp_path, files, [CODE], config=config) == expected(files, CODE)


def test_a_name_alone_is_never_enough(tmp_path):
    files = {"m.py": """
        import torch.nn as nn


        class GPTFeatureExtractor(nn.Module):
            def __init__(self, d=64):
                super().__init__()
                self.attn = nn.MultiheadAttention(d, 4, batch_first=True)

            def forward(self, x):
                return self.attn(x, x, x)[0]
    """}
    assert lint(tmp_path, files, [CODE]) == []


def test_cross_attention_in_a_causal_model_is_not_reported(tmp_path):
    files = {"m.py": """
        import torch
        import torch.nn as nn


        class CaptionDecoder(nn.Module):
            def __init__(self, vocab, d=64):
                super().__init__()
                self.emb = nn.Embedding(vocab, d)
                self.pos = nn.Embedding(64, d)
                self.cross = nn.MultiheadAttention(d, 4, batch_first=True)
                self.head = nn.Linear(d, vocab)

            def forward(self, ids, image_features):
                x = self.emb(ids) + self.pos(torch.arange(ids.size(1)))
                h, _ = self.cross(x, image_features, image_features)
                return self.head(h)

            def generate(self, ids, feats, n):
                for _ in range(n):
                    ids = torch.cat([ids, self(ids, feats)[:, -1:].argmax(-1)], 1)
                return ids
    """}
    assert lint(tmp_path, files, [CODE]) == []
