"""Repeat captures of one small bf16 training loop with the PyTorch profiler, for ``calibrate.py --repeats``.

Needs a CUDA GPU and PyTorch (torchvision for ``resnet``); neither is a kbase dependency. Each call is
one capture in a fresh process, as a CI job would make it (GPU clocks, cuDNN's algorithm choices and
allocator state all start anew)::

    for i in 1 2 3 4; do python benchmarks/capture_repeats.py gpt /tmp/rep/gpt_$i.pt.trace.json.gz; done
    python benchmarks/calibrate.py --repeats '/tmp/rep/gpt_*.pt.trace.json.gz'

``resnet``: ResNet-50, batch 64 at 224 px, channels-last, ``cudnn.benchmark`` on. ``gpt``: 8 pre-norm
transformer layers (d 1024, 16 heads, sequence 1024, batch 8) and an 8,192-way output. Both in bf16
autocast with AdamW; 5 steps before the profiler, then 1 wait, 2 warm-up and 10 active steps
(``ProfilerStep#N``), exported gzip-compressed.
"""

import gzip
import os
import shutil
import sys
import tempfile
import time

import torch
from torch.profiler import ProfilerActivity, profile, schedule


def build(work: str, dev: str):
    if work == "resnet":
        import torchvision

        model = torchvision.models.resnet50().to(dev).to(memory_format=torch.channels_last)
        x = torch.randn(64, 3, 224, 224, device=dev).to(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (64,), device=dev)
    elif work == "gpt":
        layers = [torch.nn.TransformerEncoderLayer(1024, 16, 4096, dropout=0.0, batch_first=True, norm_first=True)
                  for _ in range(8)]
        model = torch.nn.Sequential(*layers, torch.nn.Linear(1024, 8192)).to(dev)
        x = torch.randn(8, 1024, 1024, device=dev)
        y = torch.randint(0, 8192, (8, 1024), device=dev)
    else:
        raise SystemExit(f"workload {work!r}: resnet or gpt")
    return model, x, y


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    work, out = sys.argv[1], sys.argv[2]
    torch.backends.cudnn.benchmark = True
    t0 = time.time()
    model, x, y = build(work, "cuda")
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(x)
            loss = loss_fn(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    trace = os.path.join(tempfile.mkdtemp(), "trace.json")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=1, warmup=2, active=10),
                 on_trace_ready=lambda p: p.export_chrome_trace(trace)) as prof:
        for _ in range(13):
            step()
            prof.step()
    torch.cuda.synchronize()
    with open(trace, "rb") as src, gzip.open(out, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst)
    print(f"{work} -> {out}: {os.path.getsize(out) / 1e6:.1f} MB, {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
