"""Train the serving page's tiny language model, reproducibly, on the CPU.

    python -m scripts.train_tiny_lm            # writes data/serving/tiny_lm.pt and tiny_lm.json

Seeded (the corpus, the initial weights and the batches each from their own generator), one
torch thread (this is its own process, so setting the thread count here changes no one
else's), AdamW with a cosine schedule. The corpus is written by core/serving/corpus.py's
seeded grammar (the project's own text and license). The JSON beside the weights records the
command, the corpus, the parameter count, the training time and the weights' SHA-256; the
page and the engine refuse weights whose hash does not match.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

import torch
import torch.nn.functional as F

from core.serving import corpus
from core.serving.model import (
    RECORD,
    WEIGHTS,
    ModelConfig,
    encode,
    init_params,
    parameter_count,
    sequence_logits,
    sha256_of,
)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    argv = sys.argv[1:] if argv is None else argv
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    cfg = ModelConfig()
    text = corpus.generate()
    data = torch.tensor(encode(text, cfg))
    params = {k: v.requires_grad_() for k, v in init_params(cfg, args.seed).items()}
    decay = [v for k, v in params.items() if v.dim() == 2 and "emb" not in k]
    rest = [v for k, v in params.items() if not (v.dim() == 2 and "emb" not in k)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05}, {"params": rest, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    g = torch.Generator().manual_seed(args.seed + 1)
    t0 = time.perf_counter()
    loss_avg = None
    for step in range(args.steps):
        lr = args.lr * (min(1.0, (step + 1) / 50) * 0.5 * (1 + math.cos(math.pi * step / args.steps)))
        for group in opt.param_groups:
            group["lr"] = lr
        starts = torch.randint(0, len(data) - cfg.context - 1, (args.batch,), generator=g)
        xb = torch.stack([data[s:s + cfg.context] for s in starts])
        yb = torch.stack([data[s + 1:s + cfg.context + 1] for s in starts])
        loss = F.cross_entropy(sequence_logits(params, xb, cfg).reshape(-1, len(cfg.vocab)), yb.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), 1.0)
        opt.step()
        loss_avg = loss.item() if loss_avg is None else 0.95 * loss_avg + 0.05 * loss.item()
        if step % 100 == 0 or step == args.steps - 1:
            print(f"step {step:5d}  loss {loss_avg:.3f}  {time.perf_counter() - t0:.0f} s", flush=True)
    seconds = time.perf_counter() - t0
    WEIGHTS.parent.mkdir(parents=True, exist_ok=True)
    torch.save({k: v.detach().contiguous() for k, v in params.items()}, WEIGHTS)
    record = {
        "command": "python -m scripts.train_tiny_lm" + (" " + " ".join(argv) if argv else ""),
        "corpus": f"{len(text):,} characters of {corpus.DESCRIPTION}, seed {corpus.DEFAULT_SEED}",
        "sha256": sha256_of(WEIGHTS),
        "parameters": parameter_count(params),
        "train_seconds": round(seconds, 1),
        "final_loss": round(loss_avg, 4),
        "steps": args.steps,
        "torch": torch.__version__,
        "config": {k: getattr(cfg, k) for k in ("d_model", "heads", "layers", "d_mlp", "context")},
    }
    RECORD.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {WEIGHTS} ({WEIGHTS.stat().st_size / 1e6:.2f} MB, {record['parameters']:,} parameters) "
          f"in {seconds:.0f} s; loss {loss_avg:.3f}")


if __name__ == "__main__":
    main()
