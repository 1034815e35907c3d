"""TL109 label-shift-mismatch: precision guards beyond the rule document."""

from __future__ import annotations

from tests.rules.conftest import expected, lint

CODE = "TL109"


def test_seq2seq_labels_are_not_a_double_shift(tmp_path):
    files = {"m.py": """
        from transformers import AutoModelForSeq2SeqLM

        model = AutoModelForSeq2SeqLM.from_pretrained("t5-small")


        def step(input_ids, target_ids):
            return model(input_ids=input_ids, labels=target_ids[:, 1:]).loss
    """}
    assert lint(tmp_path, files, [CODE]) == []


def test_unshifted_loss_outside_a_causal_model_is_not_checked(tmp_path):
    files = {"m.py": """
        import torch.nn as nn
        import torch.nn.functional as F


        class Autoencoder(nn.Module):
            def __init__(self, vocab, d=32):
                super().__init__()
                self.emb = nn.Embedding(vocab, d)
                self.out = nn.Linear(d, vocab)

            def forward(self, ids):
                logits = self.out(self.emb(ids))
                return F.cross_entropy(logits.view(-1, logits.size(-1)), ids.view(-1))
    """}
    assert lint(tmp_path, files, [CODE]) == []


def test_unshifted_loss_in_a_training_loop_of_a_causal_file(tmp_path):
    files = {"m.py": """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class GPT(nn.Module):
            def __init__(self, vocab, d=32):
                super().__init__()
                self.wte = nn.Embedding(vocab, d)
                self.wpe = nn.Embedding(64, d)
                self.head = nn.Linear(d, vocab)

            def forward(self, idx):
                return self.head(self.wte(idx) + self.wpe(torch.arange(idx.size(1))))

            def generate(self, idx, n):
                for _ in range(n):
                    idx = torch.cat([idx, self(idx)[:, -1:].argmax(-1)], 1)
                return idx


        def train(model, batches, opt):
            for x in batches:
                logits = model(x)
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), x.view(-1))  # expect: TL109
                loss.backward()
                opt.step()
    """}
    assert lint(tmp_path, files, [CODE]) == expected(files, CODE)


def test_seq2seq_decoder_inputs_shifted_right_from_the_labels(tmp_path):
    """Encoder-decoder heads (BART, T5, Whisper) build `decoder_input_ids` by shifting the
    labels right, so the loss against the unshifted labels is the correct next-token loss."""
    files = {"m.py": """
        import torch.nn as nn
        from torch.nn import CrossEntropyLoss


        def shift_tokens_right(input_ids, pad_token_id, start_id):
            shifted = input_ids.new_zeros(input_ids.shape)
            shifted[:, 1:] = input_ids[:, :-1].clone()
            shifted[:, 0] = start_id
            return shifted


        class TinyBartForCausalLM(nn.Module):
            def __init__(self, model, d, vocab):
                super().__init__()
                self.model = model
                self.lm_head = nn.Linear(d, vocab)
                self.vocab = vocab

            def forward(self, input_ids, decoder_input_ids=None, labels=None):
                if labels is not None and decoder_input_ids is None:
                    decoder_input_ids = shift_tokens_right(labels, 0, 2)
                outputs = self.model(input_ids, decoder_input_ids=decoder_input_ids)
                lm_logits = self.lm_head(outputs[0])
                loss = None
                if labels is not None:
                    loss_fct = CrossEntropyLoss()
                    loss = loss_fct(lm_logits.view(-1, self.vocab), labels.view(-1))
                return loss, lm_logits


        class TinyT5ForCausalLM(TinyBartForCausalLM):
            def forward(self, input_ids, labels=None):
                decoder_input_ids = self._shift_right(labels)
                lm_logits = self.lm_head(self.model(input_ids, decoder_input_ids=decoder_input_ids)[0])
                return CrossEntropyLoss()(lm_logits.view(-1, self.vocab), labels.view(-1))
    """}
    assert lint(tmp_path, files, [CODE]) == []
