"""Run by tests/test_watch_distributed.py under `torchrun --nproc_per_node 2` on CPU (gloo):
`ddp` trains TinyGPT wrapped in DistributedDataParallel with a plain loop (rank 1's batch
of step 7 turns NaN; `on_nan="stop"`), `hf` the Hugging Face Trainer on a tiny GPT-2. Each
rank writes what it saw to `<out>/rank<N>.json` for the test to compare."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from tests.watchutil import TinyGPT, batches, gpt2, rows  # noqa: E402
from tlint.watch import TrainingStopped, Watch  # noqa: E402


def ddp(out: Path) -> dict:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = torch.nn.parallel.DistributedDataParallel(TinyGPT())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = batches(12, seed=rank)
    if rank == 1:
        data[6]["attention_mask"][3] = 0  # step 7 on rank 1: a row with no visible key
    w = Watch(model, opt, every=5, output_dir=str(out), on_nan="stop", print_summary=False)
    norms, stopped = {}, None
    try:
        for step, b in enumerate(data, 1):
            loss = model(b["input_ids"], b["attention_mask"])
            loss.backward()
            w.after_backward(loss)
            norms[step] = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1))
            opt.step()
            opt.zero_grad()
            w.after_step()
    except TrainingStopped as exc:
        stopped = exc.finding.to_json()
    finally:
        w.close()
    finite = all(bool(torch.isfinite(p).all()) for p in model.parameters())
    return {"rank": rank, "steps": w.steps, "stopped": stopped, "norms": norms, "weights_finite": finite,
            "samples": w._last_sample and w._last_sample["grad_norm"], "findings": [f.to_json() for f in w.findings]}


def hf(out: Path) -> dict:
    from transformers import Trainer, TrainingArguments, default_data_collator

    import tlint.watch

    args = TrainingArguments(str(out), max_steps=20, per_device_train_batch_size=4, learning_rate=1e-3,
                             lr_scheduler_type="constant", logging_steps=10, report_to=[], use_cpu=True,
                             save_strategy="no", disable_tqdm=True, max_grad_norm=1.0, ddp_backend="gloo", seed=0)
    callback = tlint.watch.HFCallback(every=10, print_summary=False)
    trainer = Trainer(model=gpt2(), args=args, train_dataset=rows(160, lengths=(16, 12)),
                      data_collator=default_data_collator, callbacks=[callback])
    trainer.train()
    w = callback.watch
    return {"rank": dist.get_rank(), "world": w.world, "steps": w.steps, "log_history": trainer.state.log_history,
            "findings": [f.to_json() for f in w.findings]}


if __name__ == "__main__":
    torch.set_num_threads(1)
    mode, out = sys.argv[1], Path(sys.argv[2])
    result = ddp(out) if mode == "ddp" else hf(out)
    (out / f"rank{result['rank']}.json").write_text(json.dumps(result))
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
    os._exit(0)
