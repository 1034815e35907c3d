"""The fix `tlint doctor` prints with each ranked item: one line per rule, data check and
probe (the rule documents under rules/ explain them at length; `tlint rule CODE` prints
one). tests/test_doctor.py checks that every rule, check and probe has its line."""

from __future__ import annotations

RULE_FIXES: dict[str, str] = {
    "TL001": "make the file parse (fix the syntax error or the encoding)",
    "TL002": "remove the `# tlint: ignore[...]` comment that suppresses nothing",
    "TL003": "report the rule's crash (tlint check --verbose shows it); its findings are missing",
    "TL101": "pass the batch's `attention_mask` to the model call",
    "TL102": "pass `key_padding_mask=` (True = pad) to the attention/transformer module",
    "TL103": "use the mask parameter in forward (pass it on to the attention)",
    "TL104": "build one tokenizer (same checkpoint and settings) and share it between training and evaluation",
    "TL105": "pass `truncation=True` with `max_length`",
    "TL106": "set the labels at pad positions to -100 (or the loss's `ignore_index`)",
    "TL107": "give padding its own token (add a pad token) so EOS keeps its labels",
    "TL108": "draw one permutation and index inputs and targets with it (or shuffle pairs)",
    "TL109": "shift the labels exactly once (Hugging Face causal LMs shift internally: pass labels = input_ids)",
    "TL110": "drop or fill missing values (dropna/fillna/nan_to_num) before the data becomes tensors",
    "TL111": "pad per batch (dynamic padding) and group sequences by length",
    "TL112": "pad with a finite value and mask the padded positions",
    "TL113": "pad the attention mask with 0, not with the pad token id",
    "TL114": "shuffle the training loader (`shuffle=True` or a random sampler)",
    "TL115": "compare target tokens with the target vocabulary's pad id",
    "TL201": "use one norm placement (pre-norm or post-norm) in every residual block",
    "TL202": "apply a final LayerNorm after the last pre-norm block, before the output head",
    "TL203": "add the sub-layer's output to the stream: x = x + f(norm(x))",
    "TL204": "slice the positional table by the sequence length (x.size(1)), not the batch size",
    "TL205": "add the positional encoding to the token embeddings in forward (or remove the dead table)",
    "TL206": "make the positional table at least as long as the longest sequence (or truncate the data)",
    "TL207": "mask future positions (a causal `tril` mask, or is_causal=True) before the softmax",
    "TL208": "scale the scores by 1/sqrt(d_head) (or use F.scaled_dot_product_attention)",
    "TL209": "take the attention softmax over the keys: dim=-1",
    "TL210": "fill masked scores with torch.finfo(scores.dtype).min, not -inf",
    "TL211": "initialise weights with std ~ 1/sqrt(fan_in) or 0.02, not a constant or std 1",
    "TL212": "split heads as view(B, T, heads, d).transpose(1, 2)",
    "TL213": "fill masked scores with a large negative value (torch.finfo(dtype).min)",
    "TL214": "pass training=self.training to functional dropout (or use nn.Dropout)",
    "TL215": "normalise the same input for queries and keys/values in a pre-norm block",
    "TL216": "slice the positional table up to the sequence length ([:T]), do not index it with T",
    "TL301": "clip gradients between backward() and step(): clip_grad_norm_(model.parameters(), 1.0)",
    "TL302": "clip between backward() and optimizer.step()",
    "TL303": "call scaler.unscale_(optimizer) before clipping",
    "TL304": "add learning-rate warmup (e.g. get_linear_schedule_with_warmup, LinearLR(start_factor=0.01))",
    "TL305": "step the scheduler after optimizer.step()",
    "TL306": "step a schedule sized in optimiser steps after each optimizer.step()",
    "TL307": "lower the learning rate (≤ 1e-3 for Adam on a transformer from scratch) or add warmup",
    "TL308": "use eps=1e-6 over fp16 parameters, or keep fp32 master weights (autocast + GradScaler)",
    "TL309": "call optimizer.zero_grad() once per optimiser step",
    "TL310": "reset gradients after step() (or before the forward pass), not between backward() and step()",
    "TL311": "divide the loss by the accumulation steps before backward()",
    "TL312": "call model.eval() before evaluating and model.train() after",
    "TL313": "turn anomaly detection on only while debugging",
    "TL314": "pass logits (or log-probabilities to nll_loss), not softmax probabilities",
    "TL315": "put biases, norms and embeddings in a parameter group with weight_decay=0",
    "TL316": "log the gradient norm (clip_grad_norm_ returns it)",
    "TL317": "zero and clip only on the micro-step that calls optimizer.step()",
    "TL318": "size the schedule in optimiser steps (epochs * len(loader)) or step it once per epoch",
}

CHECK_FIXES: dict[str, str] = {
    "nan-inf": "clean or impute the data (dropna/fillna/nan_to_num) before it reaches a tensor",
    "mask-pad-agreement": "derive the attention mask from the ids (mask = ids != pad_id) and pad it with 0",
    "pad-ratio": "pad per batch (dynamic padding) and bucket sequences by length",
    "label-alignment": "shift the labels once: in the data for a model that does not shift, else not at all",
    "label-pad-ignored": "set the labels at pad positions to -100",
    "eos-masked": "give padding its own token so real EOS tokens keep their labels",
    "loader-order": "shuffle the training loader (shuffle=True or a random sampler)",
    "tokenizer-agreement": "build the train and eval batches with one tokenizer and one padding side",
    "length-histogram": "(information)",
}

PROBE_FIXES: dict[str, str] = {
    "mask-leak": "pass the padding mask to every attention layer (and use it in the pooling)",
    "causal-leak": "mask future positions in every self-attention (causal mask or is_causal=True)",
    "nan-trace": "fill masked scores with a finite minimum, not -inf; keep inputs finite",
    "position-blind": "add positional information to the token embeddings",
    "batch-coupling": "make each sample independent of the batch (no batch statistics, positions by sequence)",
    "grad-flow": "connect every trainable parameter to the loss (or freeze the unused ones)",
    "init-stats": "initialise weights with std ~ 1/sqrt(fan_in) or 0.02; biases at 0, norms at 1",
    "attention-entropy": "scale scores by 1/sqrt(d_head) and take the softmax over the keys",
    "depth-growth": "keep a residual path in every block and one norm placement; add a final norm",
    "norm-scale": "normalise what each block's sub-layers read (the norm before the branch, or after the sum)",
    "padding-equivalence": "mask padding everywhere and derive position ids from the mask",
    "activation-ranges": "find the first flagged sub-layer and fix its scale (init, norm, or inputs)",
    "attention-maps": "pass the padding mask to the attention: real queries must put no weight on pad keys",
    "eval-determinism": "turn dropout off in eval mode (training=self.training, or nn.Dropout)",
    "optimizer-coverage": "give the optimiser every trainable parameter, each once",
    "overfit-batch": "the model cannot memorise one batch: check the loss wiring, labels and learning rate",
    "warmup-ab": "add warmup and gradient clipping, or lower the learning rate",
    "data-ab": "fix the data pipeline: the cleaned batches train better (see the data scan's failing checks)",
}


def rule_fix(code: str) -> str:
    fix = RULE_FIXES.get(code)
    if fix is not None:
        return fix
    from tlint.rules import lookup

    rule = lookup(code)
    return f"see `tlint rule {code}`" + (f": {rule.summary}" if rule is not None else "")


def probe_fix(name: str) -> str:
    return PROBE_FIXES.get(name, f"see the probe's detail (tlint verify --probe {name})")


def check_fix(name: str) -> str:
    return CHECK_FIXES.get(name, "see the check's detail (tlint scan-data)")
