"""Bytes per tracked request of candidate codings for a tighter compact
log, beside the information bound, on the arrival patterns a new format
is judged by: 10,000 entries, times in milliseconds. Payload and block
index only: a stored value adds its spare room (an eighth in version 1),
its header and the allocator's size class. Prints a Markdown table
(docs/DEVELOPMENT.md has its figures and what they mean).

    python3 scripts/encoding-frontier.py
"""
import math, random

N = 10_000

def poisson(rate_per_s, rng):
    t, out = 1_700_000_000_000.0, []
    for _ in range(N):
        t += rng.expovariate(rate_per_s / 1000.0)
        out.append(int(t))
    return out

def steady():
    return [1_700_000_000_000 + 1000 * i for i in range(N)]

def bursts():
    return [1_700_000_000_000 + 1000 * (i // 50) for i in range(N)]

def behind(rng):
    # one call in ten dated 2,000 ms before the newest entry
    out, newest, t = [], 0, 1_700_000_000_000
    for i in range(N):
        if i % 10 == 9:
            out.append(newest - 2000)
        else:
            t += int(rng.expovariate(1 / 1000.0))
            out.append(t); newest = t
    return sorted(out)

def info_bound(times):
    s = times[-1] - times[0] + 1
    n = len(times)
    # log2 C(S + n, n)
    bits = (math.lgamma(s + n + 1) - math.lgamma(s + 1) - math.lgamma(n + 1)) / math.log(2)
    return bits / 8 / n

def varint_len(v):
    n = 1
    while v >= 128:
        v >>= 7; n += 1
    return n

def v1(times):
    return 4.0 * (1 + 1 / 8)

def narrow_blocks(times, b=64):
    total = 0
    for i in range(0, len(times), b):
        blk = times[i:i + b]
        span = blk[-1] - blk[0]
        w = 1 if span < 256 else 2 if span < 65536 else 3 if span < 1 << 24 else 4
        total += 5 + w * (len(blk) - 1)
    return total / len(times)

def varint_blocks(times, block_bytes=64, index=8):
    # blocks of at most block_bytes of varint deltas; an index entry
    # (first time relative to the base, 4 bytes; entries before, 4 bytes)
    total, used, blocks = 0, 0, 1
    prev = times[0]
    for t in times[1:]:
        l = varint_len(t - prev)
        if used + l > block_bytes:
            blocks += 1; used = 0
        else:
            used += l
        prev = t
    return (blocks * (block_bytes + index)) / len(times)

def rice_blocks(times, b=128, index=8):
    total_bits = 0
    for i in range(0, len(times), b):
        blk = times[i:i + b]
        deltas = [y - x for x, y in zip(blk, blk[1:])]
        best = None
        for k in range(0, 24):
            bits = sum((d >> k) + 1 + k for d in deltas)
            best = bits if best is None or bits < best else best
        total_bits += (best or 0) + 5 + index * 8
    return total_bits / 8 / len(times)

def elias_fano_blocks(times, b=128, index=8):
    total_bits = 0
    for i in range(0, len(times), b):
        blk = times[i:i + b]
        n = len(blk)
        u = blk[-1] - blk[0] + 1
        l = max(0, int(math.floor(math.log2(max(1, u / n)))))
        total_bits += n * l + n + (u >> l) + 1 + 5 + index * 8
    return total_bits / 8 / len(times)

rng = random.Random(7)
patterns = [
    ("Poisson 0.1/s", poisson(0.1, rng), 2.5),
    ("Poisson 1/s", poisson(1, rng), 2.0),
    ("Poisson 10/s", poisson(10, rng), 1.5),
    ("Poisson 100/s", poisson(100, rng), 1.2),
    ("steady 1/s", steady(), None),
    ("bursts 50/ms, 1 s apart", bursts(), None),
    ("2 s behind, 1 in 10", behind(rng), None),
]
codecs = [
    ("v1 4-byte slots (+1/8)", v1),
    ("fixed 1-4 B per block of 64", narrow_blocks),
    ("varint, 64-byte blocks", lambda t: varint_blocks(t, 64)),
    ("varint, 256-byte blocks", lambda t: varint_blocks(t, 256)),
    ("Rice, 128 per block", rice_blocks),
    ("Elias-Fano, 128 per block", elias_fano_blocks),
]
print("| pattern | bound | target | " + " | ".join(c[0] for c in codecs) + " |")
print("|---|---|---|" + "---|" * len(codecs))
for name, times, target in patterns:
    cells = [f"{info_bound(times):.2f}", f"{target}" if target else "4.1-5.2 (v1)"]
    cells += [f"{f(times):.2f}" for _, f in codecs]
    print(f"| {name} | " + " | ".join(cells) + " |")
