"""TL211 suspicious-init: precision guards beyond the rule document."""

from __future__ import annotations

from tests.rules.conftest import expected, lint

CODE = "TL211"


def test_default_std_of_normal_is_one_on_linear_but_not_on_embedding(tmp_path):
    files = {"m.py": """
        import torch.nn as nn
        from torch.nn.init import normal_


        class Net(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.embed = nn.Embedding(100, d)
                self.proj = nn.Conv1d(d, d, 3)
                self.up = nn.Linear(d, 4 * d)
                normal_(self.embed.weight)
                normal_(self.proj.weight, 0.0, 1.0)
                normal_(self.up.weight)  # expect: TL211
                self.up.weight.data.normal_()  # expect: TL211
                self.up.weight.data.normal_(0.0, 0.02)
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_padding_rows_numbered_outputs_and_gates_are_not_flagged(tmp_path):
    files = {"m.py": """
        import torch.nn as nn


        def Embedding(num, dim, padding_idx):
            m = nn.Embedding(num, dim, padding_idx=padding_idx)
            nn.init.normal_(m.weight, mean=0, std=dim ** -0.5)
            nn.init.constant_(m.weight[padding_idx], 0)
            return m


        class FFN(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.ff1 = nn.Linear(d, 4 * d)
                self.ff2 = nn.Linear(4 * d, d)
                self.linear2 = nn.Linear(4 * d, d)
                self.proj_out = nn.Linear(d, d)
                self.to_v_head_gate = nn.Linear(d, 4)
                self.ff2.weight.data.zero_()
                nn.init.zeros_(self.linear2.weight)
                nn.init.zeros_(self.proj_out.weight)
                nn.init.constant_(self.to_v_head_gate.weight, 0)
                nn.init.constant_(self.ff1.weight, 0.5)  # expect: TL211

            def forward(self, x):
                return self.ff2(self.ff1(x))
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_constant_output_projection_is_flagged_only_when_not_zero(tmp_path):
    files = {"m.py": """
        import torch.nn as nn


        class Attn(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.o_proj = nn.Linear(d, d)
                self.down_proj = nn.Linear(d, d)
                nn.init.zeros_(self.o_proj.weight)
                nn.init.constant_(self.down_proj.weight, 0.1)  # expect: TL211
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_init_under_an_option_or_a_name_test_is_the_users_choice(tmp_path):
    files = {"m.py": """
        import torch.nn as nn


        def init_weights(module, name="", zero_init=False):
            if isinstance(module, nn.Linear):
                if name.startswith("head"):
                    nn.init.zeros_(module.weight)
                elif zero_init:
                    nn.init.zeros_(module.weight)
                else:
                    nn.init.xavier_uniform_(module.weight)


        class Net(nn.Module):
            def __init__(self, cfg, d):
                super().__init__()
                self.fc = nn.Linear(d, d)
                for n, m in self.named_modules():
                    if "fc" in n and isinstance(m, nn.Linear):
                        nn.init.zeros_(m.weight)
                nn.init.zeros_(self.fc.weight) if cfg.zero_init_fc else nn.init.normal_(self.fc.weight, std=0.01)
    """}
    assert lint(tmp_path, files, [CODE]) == []


def test_isinstance_branches_and_module_loops(tmp_path):
    files = {"m.py": """
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.fc = nn.Linear(d, d)
                for m in self.modules():
                    if isinstance(m, nn.Linear):
                        m.weight.data.fill_(0.01)  # expect: TL211
                    elif isinstance(m, (nn.LayerNorm, nn.BatchNorm1d)):
                        m.weight.data.fill_(1.0)
                        m.bias.data.zero_()
                    elif isinstance(m, nn.Embedding):
                        nn.init.zeros_(m.weight)  # expect: TL211
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_reinitialised_later_is_fine_but_a_constant_after_a_random_init_is_not(tmp_path):
    files = {"m.py": """
        import torch.nn as nn
        from timm.layers import trunc_normal_


        class Net(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.q = nn.Linear(d, d)
                self.k = nn.Linear(d, d)
                nn.init.zeros_(self.q.weight)
                trunc_normal_(self.q.weight, std=0.02)
                nn.init.normal_(self.k.weight, std=0.02)
                nn.init.zeros_(self.k.weight)  # expect: TL211

            def reset_parameters(self):
                nn.init.xavier_uniform_(self.q.weight)
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_raw_parameters_used_as_matmul_weights(tmp_path):
    files = {"m.py": """
        import math

        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        from einops import einsum


        class Net(nn.Module):
            def __init__(self, d, rank):
                super().__init__()
                self.w_q = nn.Parameter(torch.zeros(d, d))  # expect: TL211
                self.w_k = nn.Parameter(torch.randn(d, d))  # expect: TL211
                self.w_v = nn.Parameter(torch.randn(d, d))
                self.w_o = nn.Parameter(torch.randn(d, d))
                self.weight_a = nn.Parameter(torch.randn(d, rank))
                self.weight_b = nn.Parameter(torch.randn(rank, d))
                self.lora_up = nn.Parameter(torch.zeros(d, 8))
                self.pos_emb = nn.Parameter(torch.zeros(64, d))
                self.memory_tokens = nn.Parameter(torch.randn(4, d))
                self.readout = nn.Parameter(torch.randn(d, d))
                self.bias = nn.Parameter(torch.zeros(d))
                self.w_v.data /= math.sqrt(d)
                nn.init.normal_(self.w_o, std=0.02)

            def forward(self, x):
                q = torch.matmul(x, self.w_q)
                k = F.linear(x, self.w_k)
                v = x @ self.w_v @ self.w_o
                low = x @ (self.weight_a @ self.weight_b)
                extra = (x[..., :8] @ self.lora_up.T) + x @ self.pos_emb.T
                mem = torch.cat([self.memory_tokens.expand(x.size(0), -1, -1), x], dim=1)
                out = einsum(x, self.readout, "b n d, n d -> b n")
                return q + k + v + low + extra + out + mem.sum() + self.bias
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_local_modules_and_conv_kernels(tmp_path):
    files = {"m.py": """
        import torch.nn as nn

        query = nn.Linear(16, 16)
        query.weight.data.zero_()  # expect: TL211


        def build(channels):
            start = nn.Conv1d(channels, channels, 1)
            nn.init.zeros_(start.weight)  # expect: TL211
            # the last layer at zero: the coupling starts as the identity
            end = nn.Conv1d(channels, 2 * channels, 1)
            end.weight.data.zero_()
            end.bias.data.zero_()
            return start, end
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_test_files_are_skipped(tmp_path):
    files = {"tests/test_init.py": """
        import torch.nn as nn

        lin = nn.Linear(4, 4)
        nn.init.zeros_(lin.weight)
    """}
    assert lint(tmp_path, files, [CODE]) == []


def test_a_constant_before_the_models_initialiser_is_overwritten(tmp_path):
    files = {"m.py": """
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.q = nn.Linear(d, d)
                self.k = nn.Linear(d, d)
                nn.init.zeros_(self.q.weight)
                self.apply(self._init_weights)
                nn.init.zeros_(self.k.weight)  # expect: TL211

            def _init_weights(self, module):
                if isinstance(module, nn.Linear):
                    nn.init.normal_(module.weight, std=0.02)
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_designed_inits_and_single_unit_readouts_are_not_flagged(tmp_path):
    files = {"m.py": """
        import torch
        import torch.nn as nn


        class MeanPool(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.q_proj = nn.Linear(d, d)
                self.k_proj = nn.Linear(d, d)
                self.v_proj = nn.Linear(d, d)
                # zero queries: uniform attention, i.e. a mean pool at init
                nn.init.zeros_(self.q_proj.weight)
                nn.init.eye_(self.v_proj.weight)


        class Router(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.q_proj = nn.Linear(d, d)
                self.mix = nn.Linear(d, d)
                self.quality = nn.Linear(128, 1)
                nn.init.zeros_(self.q_proj.weight)
                nn.init.ones_(self.q_proj.bias)
                nn.init.zeros_(self.quality.weight)
                nn.init.zeros_(self.mix.weight)
                with torch.no_grad():
                    self.mix.weight[0, 0] = 1.0


        class Plain(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.q_proj = nn.Linear(d, d)
                nn.init.zeros_(self.q_proj.weight)  # expect: TL211
                nn.init.zeros_(self.q_proj.bias)
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_weight_on_the_left_of_a_column_vector_product(tmp_path):
    files = {"m.py": """
        import torch
        import torch.nn as nn


        class CrossLayer(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.W = nn.Parameter(torch.randn(dim, dim))  # expect: TL211
                self.b = nn.Parameter(torch.zeros(dim))

            def forward(self, x_l, x_0):
                return x_0 * (self.W @ x_l + self.b) + x_l
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_custom_linear_with_its_own_weight_parameter(tmp_path):
    files = {"m.py": """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class MyLinear(nn.Module):
            def __init__(self, d_in, d_out):
                super().__init__()
                self.weight = nn.Parameter(torch.empty(d_out, d_in))
                self.bias = nn.Parameter(torch.empty(d_out))
                nn.init.zeros_(self.weight)  # expect: TL211
                nn.init.zeros_(self.bias)

            def forward(self, x):
                return F.linear(x, self.weight, self.bias)
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


_BERT = """
    import torch.nn as nn


    class SelfAttention(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.qkv = nn.Linear(d, 3 * d)
            self.out = nn.Linear(d, d)
            self.score_bias = nn.Linear(d, 1)

        def forward(self, x):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            return self.out((q @ k.transpose(-2, -1)).softmax(-1) @ v)
"""


def test_projection_declared_by_a_base_class_of_another_file(tmp_path):
    files = {
        "bert.py": _BERT,
        "variants.py": """
            import torch.nn as nn
            from bert import SelfAttention


            class ZeroQKV(SelfAttention):
                def __init__(self, d, heads):
                    super().__init__(d, heads)
                    nn.init.zeros_(self.qkv.weight)  # expect: TL211


            class WideQKV(SelfAttention):
                def __init__(self, d, heads):
                    super().__init__(d, heads)
                    nn.init.normal_(self.qkv.weight, std=1.0)  # expect: TL211
                    nn.init.normal_(self.qkv.weight, std=0.02)


            class Fine(SelfAttention):
                def __init__(self, d, heads):
                    super().__init__(d, heads)
                    nn.init.zeros_(self.out.weight)  # a residual output projection: Fixup-style
                    nn.init.zeros_(self.score_bias.weight)  # not a q/k/v name: kind unknown
                    nn.init.zeros_(self.qkv.bias)
                    nn.init.zeros_(self.gate.weight)


            class Reinit(SelfAttention):
                def __init__(self, d, heads, zero=False):
                    super().__init__(d, heads)
                    if zero:
                        nn.init.zeros_(self.qkv.weight)  # the user's option
                    nn.init.zeros_(self.q_proj.weight)
                    nn.init.xavier_uniform_(self.q_proj.weight)


            class Plain(nn.Module):  # torch's Module declares nothing: no guess
                def __init__(self):
                    super().__init__()
                    nn.init.zeros_(self.qkv.weight)
        """,
    }
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_projection_declared_by_a_base_class_of_the_same_file(tmp_path):
    files = {"m.py": _BERT + """

    class ZeroQKV(SelfAttention):
        def __init__(self, d, heads):
            super().__init__(d, heads)
            nn.init.zeros_(self.qkv.weight)  # expect: TL211
            nn.init.zeros_(self.score_bias.weight)  # one output unit
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_the_last_layer_of_a_path_may_start_at_zero(tmp_path):
    """Zero where the output is returned, added to a shortcut or only scales and shifts the
    stream; still reported where another layer, a matrix product or an activation reads it."""
    files = {"m.py": """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Block(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.lin_a = nn.Linear(d, d)
                self.lin_b = nn.Linear(d, d)
                self.lin_c = nn.Linear(d, 2 * d)
                self.lin_d = nn.Linear(d, d)
                self.lin_e = nn.Linear(d, d)
                self.lin_f = nn.Linear(d, d)
                self.lin_g = nn.Linear(d, d)
                nn.init.zeros_(self.lin_a.weight)
                nn.init.zeros_(self.lin_b.weight)
                nn.init.zeros_(self.lin_c.weight)
                nn.init.zeros_(self.lin_d.weight)  # expect: TL211
                nn.init.zeros_(self.lin_e.weight)  # expect: TL211
                nn.init.zeros_(self.lin_f.weight)  # expect: TL211
                nn.init.zeros_(self.lin_g.weight)  # its output joins the sum returned

            def forward(self, x, c):
                h = self.lin_a(x)  # returned below, through a name
                x = x + self.lin_b(x)  # added to the stream
                scale, shift = self.lin_c(c).chunk(2, dim=-1)  # modulation
                x = x * (1 + scale) + shift
                q = self.lin_d(x)  # a matrix product reads it
                attn = torch.softmax(q @ x.transpose(-2, -1), dim=-1)
                y = F.gelu(self.lin_e(x))  # an activation reads it
                z = self.lin_g(self.lin_f(y))  # another layer reads it
                return h, attn @ x + z
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_the_path_is_read_in_the_class_the_init_goes_through(tmp_path):
    """`self.fc.proj.weight`: `proj` of the class of `fc`, not another class's `proj`."""
    files = {"m.py": """
        import torch.nn as nn
        import torch.nn.functional as F


        class Readout(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.mapping = nn.Linear(d, d)

            def forward(self, x):
                return self.mapping(x)


        class Hidden(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.mapping = nn.Linear(d, d)

            def forward(self, x):
                return F.relu(self.mapping(x))


        class Net(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.out = Readout(d)
                self.hidden = Hidden(d)
                nn.init.zeros_(self.out.mapping.weight)
                nn.init.zeros_(self.hidden.mapping.weight)  # expect: TL211

            def forward(self, x):
                return self.out(self.hidden(x))
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)
