#!/usr/bin/env python3
"""Writes the reference fixtures the Go import tests read, with the
projects' own Python libraries (not qgemv code):

  layout/gguf/testdata/gguf_py.gguf
      written by gguf-py (llama.cpp's Python package, Debian python3-gguf):
      Q4_0, Q4_1 and Q8_0 tensors quantized by gguf.quants.quantize, a Q4_K
      tensor of random blocks, an F16 tensor, and for each quantized tensor
      NAME an F32 tensor NAME.expected = gguf.quants.dequantize(NAME).

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


def write_gguf(path):
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("qgemv reference fixture")
    x = rng.standard_normal((6, 256)).astype(np.float32)
    for name, t in [("q4_0", T.Q4_0), ("q4_1", T.Q4_1), ("q8_0", T.Q8_0)]:
        q = quants.quantize(x * (1 + rng.random()), t)
        w.add_tensor(name, q, raw_dtype=t)
        w.add_tensor(name + ".expected", quants.dequantize(q, t).astype(np.float32))
    # Q4_K: random blocks with sane binary16 d and dmin.
    blocks = rng.integers(0, 256, size=(4, 2, 144), dtype=np.uint8)
    d = (rng.random((4, 2)) * 0.01 + 1e-4).astype(np.float16)
    dmin = (rng.random((4, 2)) * 0.01 + 1e-4).astype(np.float16)
    blocks[:, :, 0:2] = d.view(np.uint8).reshape(4, 2, 2)
    blocks[:, :, 2:4] = dmin.view(np.uint8).reshape(4, 2, 2)
    q4k = blocks.reshape(4, 2 * 144)
    w.add_tensor("q4_k", q4k, raw_dtype=T.Q4_K)
    w.add_tensor("q4_k.expected", quants.dequantize(q4k, T.Q4_K).astype(np.float32))
    w.add_tensor("f16", (x[:2] * 3).astype(np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


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
write_safetensors("layout/hfquant/testdata/reference.safetensors")
