# Which K/V strides cuTensorMapEncodeTiled takes (BENCHMARKS.md log 74): a rank-4 map
# (D, S, H, B) of f16 with the kernels' box (64 columns, 64 rows) and 128-byte swizzle,
# encoded for strides the API accepts (BSHD, zero, overlapping) and one past 2^40 bytes.
import ctypes as C
cu = C.CDLL("libcuda.so.1")
assert cu.cuInit(0) == 0
dev = C.c_int(); cu.cuDeviceGet(C.byref(dev), 0)
ctx = C.c_void_p(); assert cu.cuDevicePrimaryCtxRetain(C.byref(ctx), dev) == 0
cu.cuCtxSetCurrent(ctx)
ptr = C.c_uint64(); assert cu.cuMemAlloc_v2(C.byref(ptr), 1 << 26) == 0
def enc(name, dims, strides_elems, box=(64, 64, 1, 1)):
    tmap = (C.c_uint64 * 16)()
    gd = (C.c_uint64 * 4)(*dims)
    gs = (C.c_uint64 * 3)(*[s * 2 for s in strides_elems])
    bd = (C.c_uint32 * 4)(*box)
    es = (C.c_uint32 * 4)(1, 1, 1, 1)
    r = cu.cuTensorMapEncodeTiled(tmap, 6, 4, C.c_void_p(ptr.value), gd, gs, bd, es, 0, 3, 3, 0)
    print(f"{name:40s} dims={dims} strides={strides_elems} -> {r}")
# dims (D, S, H, B); strides (seq, head, batch) in elements
enc("BHSD packed", (64, 512, 16, 4), (64, 512 * 64, 16 * 512 * 64))
enc("BSHD", (64, 512, 16, 4), (16 * 64, 64, 16 * 512 * 64))
enc("batch stride 0, batch 1", (64, 512, 16, 1), (64, 512 * 64, 0))
enc("batch stride 0, batch 4", (64, 512, 16, 4), (64, 512 * 64, 0))
enc("head stride 0, heads 16", (64, 512, 16, 4), (64, 0, 512 * 64))
enc("seq stride 0", (64, 512, 16, 4), (0, 512 * 64, 16 * 512 * 64))
enc("overlapping rows seq 8", (64, 512, 16, 4), (8, 512 * 64, 16 * 512 * 64))
enc("seq stride 56 (< D)", (64, 512, 16, 4), (56, 512 * 64, 16 * 512 * 64))
enc("D=256 box 64", (256, 2048, 16, 4), (256, 2048 * 256, 16 * 2048 * 256))
enc("seq_len 1", (64, 1, 16, 4), (64, 64, 16 * 64))
enc("huge stride 2^39 elems", (64, 512, 2, 1), (64, 1 << 39, 0))
enc("box rows 128", (64, 512, 16, 4), (64, 512 * 64, 16 * 512 * 64), (64, 128, 1, 1))
