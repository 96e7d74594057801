"""How many copies C at inference? Invariance, accuracy and cost (AugNet paper, Fig. B.4 and B.6).
===============================================================================================

Trains one AugNet on the sinusoid task with the settings of ``examples/sinusoids.py``
(three candidates around a small 1-D CNN, 4 copies in training), then, for
C = 1, 4, 10 copies at inference, measures the test accuracy and the median
invariance score (AugNet eq. 4, cosine, clean baseline) of the output to the
data's true invariance, frequency shifts of up to ±0.5 Hz; and, for C = 1, 2,
4, 10, the forward time with C copies over the time of the trunk alone on the
same test batch (medians of ``torch.utils.benchmark``).

::

    python examples/copies.py --quick
    python examples/copies.py --transforms FrequencyShift   # the shift alone
"""

import argparse

import torch
from torch.utils import benchmark

from augnet import probes
from augnet.data import sinusoids
from augnet.experiments import SinusoidsConfig, run_sinusoids
from augnet.transforms import signal as S


def median_seconds(fn, min_run_time):
    return benchmark.Timer("fn()", globals={"fn": fn}).blocked_autorange(min_run_time=min_run_time).median


def main():
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--quick", action="store_true", help="15 epochs on 200 signals, shorter timings")
    parser.add_argument("--transforms", nargs="+", default=list(SinusoidsConfig.transforms))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)  # small model, shared CPU: one thread is the steadiest

    config = SinusoidsConfig(transforms=tuple(args.transforms), seed=args.seed)
    if args.quick:
        config.epochs, config.n_train, config.n_test = 15, 200, 100
    result = run_sinusoids(config, progress=True)
    model = result.model.eval()
    print(result.policy)
    x, y = sinusoids(config.n_test, seed=args.seed + 10_000)  # the test set of run_sinusoids

    true_shift = S.FrequencyShift(100.0, max_shift=0.5)
    print("\n C  accuracy  invariance median [25%, 75%]")
    for c in (1, 4, 10):
        with torch.no_grad():
            out = model(x, copies=c, generator=torch.Generator().manual_seed(0))
        acc = float((out.argmax(1) == y).float().mean())
        model.aggregation = "mean"  # the probe reads the mean of the trunk's logits over the copies
        inv = probes.invariance_curve(model, x, true_shift, [1.0], copies=c, seed=0)["summary"][0]
        model.aggregation = "log_softmax"
        print(f"{c:2d}  {acc:8.3f}  {inv['median']:6.3f} [{inv['p25']:6.3f}, {inv['p75']:6.3f}]")

    min_run_time = 0.2 if args.quick else 1.0
    with torch.no_grad():
        trunk = median_seconds(lambda: model.trunk(x), min_run_time)
        print(f"\ntrunk alone on {len(x)} signals: {trunk * 1e3:.1f} ms")
        for c in (1, 2, 4, 10):
            t = median_seconds(lambda c=c: model(x, copies=c), min_run_time)
            print(f"C = {c:2d}: {t * 1e3:7.1f} ms = {t / trunk:5.2f} x the trunk")


if __name__ == "__main__":
    main()
