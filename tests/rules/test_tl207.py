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


def test_mask_built_causal_by_the_model_and_passed_down_to_the_layer(tmp_path):
    """Hugging Face decoders build the causal mask once in the model (`create_causal_mask`)
    and hand it to each attention layer as `attention_mask`, which the layer adds to the
    scores; without such a builder in the file the same layer is still flagged."""
    layer = """
        import math

        import torch
        import torch.nn as nn
        {builder}


        class TinyAttention(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.qkv = nn.Linear(d, 3 * d)
                self.d = d

            def forward(self, x, attention_mask=None):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                scores = q @ k.transpose(-1, -2) / math.sqrt(self.d)
                if attention_mask is not None:
                    scores = scores + attention_mask
                return torch.softmax(scores, dim=-1) @ v  # expect: TL207
    """
    model = """

        class TinyForCausalLM(nn.Module):
            def __init__(self, vocab, d):
                super().__init__()
                self.embed = nn.Embedding(vocab, d)
                self.pos = nn.Embedding(512, d)
                self.attn = TinyAttention(d)
                self.lm_head = nn.Linear(d, vocab)

            def forward(self, input_ids, attention_mask=None, labels=None):
                positions = torch.arange(input_ids.size(1))
                x = self.embed(input_ids) + self.pos(positions)
                mask = create_causal_mask(input_ids, attention_mask)
                logits = self.lm_head(self.attn(x, attention_mask=mask))
                return nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)),
                                                   labels[:, 1:].reshape(-1))
    """
    builder = "from transformers.masking_utils import create_causal_mask"
    with_builder = {"m.py": layer.replace("  # expect: TL207", "").format(builder=builder) + model}
    assert lint(tmp_path / "a", with_builder, [CODE]) == []
    without = {"m.py": layer.format(builder="") + model.replace("create_causal_mask(input_ids, attention_mask)",
                                                                "attention_mask")}
    assert lint(tmp_path / "b", without, [CODE]) == expected(without, CODE)


def test_attention_reached_through_containers_gets_the_models_evidence(tmp_path):
    """Issue 21: blocks held in an `nn.ModuleDict` / `nn.Sequential(*[...])` / a helper
    factory join the model, so its `generate` loop makes their attention causal; an
    attention class no model of the file holds is not judged by it."""
    files = {"m.py": """
        import torch
        import torch.nn as nn


        class Attention(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.qkv = nn.Linear(d, 3 * d)

            def forward(self, x):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                return torch.softmax(q @ k.transpose(-2, -1) / 8.0, dim=-1) @ v  # expect: TL207


        class Pooling(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.score = nn.Linear(d, 1)

            def forward(self, x):
                return (torch.softmax(self.score(x), dim=1) * x).sum(1)


        def stack(d, n):
            return nn.Sequential(*[Attention(d) for _ in range(n)])


        class LM(nn.Module):
            def __init__(self, vocab, d):
                super().__init__()
                self.parts = nn.ModuleDict(dict(emb=nn.Embedding(vocab, d), blocks=stack(d, 2)))
                self.head = nn.Linear(d, vocab)

            def forward(self, idx):
                return self.head(self.parts.blocks(self.parts.emb(idx)))

            def generate(self, idx, steps):
                for _ in range(steps):
                    idx = torch.cat([idx, self(idx)[:, -1:].argmax(-1)], dim=1)
                return idx
    """}
    assert lint(tmp_path, files, ["TL207"]) == expected(files, "TL207")


def test_an_empty_mask_or_a_false_causal_flag_is_no_mask(tmp_path):
    """Issue 21: `attn_mask=None` (keyword or position), `is_causal=False` or a local bound to
    either does not mask; a mask parameter passed on, or a flag known True, does."""
    files = {"m.py": """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class LM(nn.Module):
            def __init__(self, vocab, d):
                super().__init__()
                self.emb = nn.Embedding(vocab, d)
                self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
                self.head = nn.Linear(d, vocab)

            def forward(self, idx, mask=None):
                x = self.emb(idx)
                causal = False
                a = F.scaled_dot_product_attention(x, x, x, None, is_causal=causal)  # expect: TL207
                b = F.scaled_dot_product_attention(x, x, x, attn_mask=None)  # expect: TL207
                c, _ = self.attn(x, x, x, attn_mask=None)  # expect: TL207
                d = F.scaled_dot_product_attention(x, x, x, attn_mask=mask)
                flag = True
                e = F.scaled_dot_product_attention(x, x, x, is_causal=flag)
                return self.head(a + b + c + d + e)

            def generate(self, idx, steps):
                for _ in range(steps):
                    idx = torch.cat([idx, self(idx)[:, -1:].argmax(-1)], dim=1)
                return idx
    """}
    assert lint(tmp_path, files, ["TL207"]) == expected(files, "TL207")


def test_an_attention_class_named_causal_is_causal(tmp_path):
    """`SparseCausalAttention` whose masked fill is out of place (its result dropped): the
    scores reach the softmax unmasked; the in-place fill masks them; a class named
    non-causal, or one without the word, is not judged by its name."""
    body = """
            def forward(self, q, k, v):
                dots = torch.einsum("bid,bjd->bij", q, k) * self.scale
                i, j = dots.shape[-2:]
                causal_mask = torch.ones(i, j, device=q.device).triu_(j - i + 1).bool()
                dots.{fill}(causal_mask, -torch.finfo(dots.dtype).max)
                attn = dots.softmax(dim=-1){expect}
                return torch.einsum("bij,bjd->bid", attn, v)
    """
    head = """
        import torch
        from torch import nn


        class {name}(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.scale = dim ** -0.5
    """

    def source(name, fill, expect=""):
        return head.format(name=name) + body.format(fill=fill, expect=expect)

    files = {"m.py": source("SparseCausalAttention", "masked_fill", "  # expect: TL207")}
    assert lint(tmp_path / "a", files, [CODE]) == expected(files, CODE)
    assert lint(tmp_path / "b", {"m.py": source("SparseCausalAttention", "masked_fill_")}, [CODE]) == []
    assert lint(tmp_path / "c", {"m.py": source("NonCausalAttention", "masked_fill")}, [CODE]) == []
    assert lint(tmp_path / "d", {"m.py": source("SparseAttention", "masked_fill")}, [CODE]) == []
