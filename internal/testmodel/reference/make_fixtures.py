#!/usr/bin/env python3
"""Writes the reference fixtures the Go import tests read, with the
projects' own Python libraries (not qgemv code):

  layout/gguf/testdata/gguf_py.gguf
      written by gguf-py (llama.cpp's Python package, Debian python3-gguf):
      Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 tensors quantized by
      gguf.quants.quantize, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS
      tensors of random blocks (finite binary16 fields), an F16 tensor, and
      for each quantized tensor NAME an F32 tensor NAME.expected =
      gguf.quants.dequantize(NAME).

  layout/gguf/testdata/mixed.gguf, mixed_expected.gguf
      a model-shaped file with one tensor of every type qgemv imports (the
      quantized ones above, F16, BF16 and F32), and beside it, for each
      tensor NAME, the F32 tensor NAME = gguf.quants.dequantize(NAME).

  layout/hfquant/testdata/reference.safetensors
      written by the safetensors library (Debian python3-safetensors):
      GPTQ (4-bit g32 act-order; 3-bit g64), AWQ (g64) and HQQ (4-bit and
      3-bit, fractional zeros) layers packed with numpy following each
      project's published packing code, and PREFIX.expected, the weights
      w[out, in] computed in numpy (float64, rounded once to float32) from
      the unpacked values.

Run from the repository root (Debian bookworm: the two packages come from
sid as .deb files, unpacked onto PYTHONPATH; see README "Import"):

  PYTHONPATH=... python3 internal/testmodel/reference/make_fixtures.py
"""
import numpy as np
import gguf
from gguf import quants, GGMLQuantizationType as T
from safetensors.numpy import save_file

rng = np.random.default_rng(20261122)


# Byte offsets of the binary16 fields of each block type (ggml-common.h)
# and the range random blocks draw them from.
HALVES = {
    T.Q2_K: [(80, 1e-4, 1e-2), (82, 1e-4, 1e-2)],
    T.Q3_K: [(108, 1e-4, 1e-2)],
    T.Q4_K: [(0, 1e-4, 1e-2), (2, 1e-4, 1e-2)],
    T.Q5_K: [(0, 1e-4, 1e-2), (2, 1e-4, 1e-2)],
    T.Q6_K: [(208, 1e-4, 1e-2)],
    T.IQ4_NL: [(0, 1e-3, 2e-2)],
    T.IQ4_XS: [(0, 1e-4, 1e-2)],
}
QUANTIZED = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]


def random_blocks(t, rows, cols):
    """rows x cols of type t as random bytes with sane binary16 fields."""
    block, size = gguf.GGML_QUANT_SIZES[t]
    n = cols // block
    b = rng.integers(0, 256, size=(rows, n, size), dtype=np.uint8)
    for off, lo, hi in HALVES[t]:
        h = (lo + rng.random((rows, n)) * (hi - lo)).astype(np.float16)
        b[:, :, off:off + 2] = h.view(np.uint8).reshape(rows, n, 2)
    return b.reshape(rows, n * size)


def make(t, rows, cols):
    """A quantized tensor of type t and its reference dequantization."""
    if t in QUANTIZED:
        x = rng.standard_normal((rows, cols)).astype(np.float32) * (1 + rng.random())
        q = quants.quantize(x, t)
    else:
        q = random_blocks(t, rows, cols)
    return q, quants.dequantize(q, t).astype(np.float32)


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_gguf(path):
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("qgemv reference fixture")
    for t in QUANTIZED + list(HALVES):
        q, want = make(t, 4, 512)
        name = t.name.lower()
        w.add_tensor(name, q, raw_dtype=t)
        w.add_tensor(name + ".expected", want)
    x = rng.standard_normal((2, 256)).astype(np.float32)
    w.add_tensor("f16", (x * 3).astype(np.float16))
    finish(w)


def write_mixed(path, expected_path):
    """A model-shaped file, one tensor of every importable type."""
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("qgemv mixed-type fixture")
    w.add_block_count(1)
    e = gguf.GGUFWriter(expected_path, "llama")
    e.add_name("qgemv mixed-type fixture: reference dequantization")
    names = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"]
    types = QUANTIZED + list(HALVES)
    for i, t in enumerate(types):
        name = "blk.%d.%s.weight" % (i // len(names), names[i % len(names)])
        q, want = make(t, 8, 768 if i % 2 else 512)
        w.add_tensor(name, q, raw_dtype=t)
        e.add_tensor(name, want)
    x = rng.standard_normal((6, 256)).astype(np.float32)
    w.add_tensor("token_embd.weight", x.astype(np.float16))
    e.add_tensor("token_embd.weight", x.astype(np.float16).astype(np.float32))
    bf = quants.quantize(x[:4] * 2, T.BF16)
    w.add_tensor("output.weight", bf, raw_dtype=T.BF16)
    e.add_tensor("output.weight", quants.dequantize(bf, T.BF16).astype(np.float32))
    w.add_tensor("output_norm.weight", x[0])
    e.add_tensor("output_norm.weight", x[0])
    finish(w)
    finish(e)


def gptq_pack_rows(v, bits):
    """AutoGPTQ's pack: v is (n, m) codes, packed along axis 0 into int32."""
    n, m = v.shape
    v = v.astype(np.uint32)
    if bits != 3:
        per = 32 // bits
        out = np.zeros((n // per, m), dtype=np.uint32)
        for j in range(per):
            out |= v[j::per] << np.uint32(bits * j)
        return out.view(np.int32)
    out = np.zeros((n // 32 * 3, m), dtype=np.uint32)
    i = row = 0
    while row < out.shape[0]:
        for j in range(i, i + 10):
            out[row] |= v[j] << np.uint32(3 * (j - i))
        i += 10
        out[row] |= v[i] << np.uint32(30)
        row += 1
        out[row] |= (v[i] >> np.uint32(2)) & np.uint32(1)
        i += 1
        for j in range(i, i + 10):
            out[row] |= v[j] << np.uint32(3 * (j - i) + 1)
        i += 10
        out[row] |= v[i] << np.uint32(31)
        row += 1
        out[row] |= (v[i] >> np.uint32(1)) & np.uint32(3)
        i += 1
        for j in range(i, i + 10):
            out[row] |= v[j] << np.uint32(3 * (j - i) + 2)
        i += 10
        row += 1
    return out.view(np.int32)


def gptq_layer(t, prefix, infeat, outfeat, bits, group, act_order):
    groups = infeat // group
    q = rng.integers(0, 2**bits, size=(infeat, outfeat))
    zs = rng.integers(0, 2**bits - 1, size=(groups, outfeat))  # stored z - 1
    scales = (rng.random((groups, outfeat)) * 0.02 + 1e-3).astype(np.float16)
    g_idx = np.arange(infeat) // group
    if act_order:
        perm = rng.permutation(infeat)
        g_idx = np.empty(infeat, dtype=np.int64)
        g_idx[perm] = np.arange(infeat) // group
    t[prefix + ".qweight"] = gptq_pack_rows(q, bits)
    t[prefix + ".qzeros"] = gptq_pack_rows(zs.T, bits).T.copy()
    t[prefix + ".scales"] = scales
    t[prefix + ".g_idx"] = g_idx.astype(np.int32)
    w = scales.astype(np.float64)[g_idx, :] * (q - (zs[g_idx, :] + 1))  # (in, out)
    t[prefix + ".expected"] = w.T.astype(np.float32).copy()


def awq_layer(t, prefix, infeat, outfeat, group):
    order = [0, 2, 4, 6, 1, 3, 5, 7]
    groups = infeat // group
    q = rng.integers(0, 16, size=(infeat, outfeat))
    z = rng.integers(0, 16, size=(groups, outfeat))
    scales = (rng.random((groups, outfeat)) * 0.02 + 1e-3).astype(np.float16)

    def pack(v):
        out = np.zeros((v.shape[0], v.shape[1] // 8), dtype=np.uint32)
        for col in range(v.shape[1] // 8):
            for i in range(8):
                out[:, col] |= v[:, col * 8 + order[i]].astype(np.uint32) << np.uint32(i * 4)
        return out.view(np.int32)

    t[prefix + ".qweight"] = pack(q)
    t[prefix + ".qzeros"] = pack(z)
    t[prefix + ".scales"] = scales
    g = np.arange(infeat) // group
    w = scales.astype(np.float64)[g, :] * (q - z[g, :])
    t[prefix + ".expected"] = w.T.astype(np.float32).copy()


def hqq_layer(t, prefix, rows, cols, bits, group):
    n = rows * cols // group
    wq = rng.integers(0, 2**bits, size=(n, group))
    scale = (rng.random((n, 1)) * 0.05 + 1e-3).astype(np.float16)
    zero = (rng.random((n, 1)) * (2**bits - 1)).astype(np.float16)  # fractional
    if bits == 4:  # BitPack.pack_4bit_u8
        step = n // 2
        packed = ((wq[:step] << 4) | wq[step:]).astype(np.uint8)
    elif bits == 3:  # BitPack.pack_3bit_32
        pad = np.zeros((10 * int(np.ceil(n / 10.0)), group), dtype=np.int64)
        pad[:n] = wq
        step = len(pad) // 10
        packed = np.zeros((step, group), dtype=np.int64)
        for f in range(10):
            packed |= pad[f * step:(f + 1) * step] << (27 - 3 * f)
        packed = packed.astype(np.int32)
    else:
        raise ValueError(bits)
    t[prefix + ".W_q"] = packed
    t[prefix + ".scale"] = scale
    t[prefix + ".zero"] = zero
    t[prefix + ".shape"] = np.array([rows, cols], dtype=np.int64)
    t[prefix + ".nbits"] = np.array([bits], dtype=np.int64)
    t[prefix + ".group_size"] = np.array([group], dtype=np.int64)
    w = (wq - zero.astype(np.float64)) * scale.astype(np.float64)  # (n, group)
    t[prefix + ".expected"] = w.reshape(rows, cols).astype(np.float32)


def write_safetensors(path):
    t = {}
    gptq_layer(t, "gptq4", 256, 64, 4, 32, True)
    gptq_layer(t, "gptq3", 256, 32, 3, 64, False)
    awq_layer(t, "awq", 256, 64, 64)
    hqq_layer(t, "hqq4", 16, 256, 4, 64)
    hqq_layer(t, "hqq3", 12, 256, 3, 128)
    save_file(t, path, metadata={"format": "pt", "generator": "qgemv make_fixtures.py"})


write_gguf("layout/gguf/testdata/gguf_py.gguf")
write_mixed("layout/gguf/testdata/mixed.gguf", "layout/gguf/testdata/mixed_expected.gguf")
write_safetensors("layout/hfquant/testdata/reference.safetensors")
