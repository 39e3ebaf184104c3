# TMA from a kernel parameter declared `.align 8` (what rustc emits for a by-value [u64; 16])
# against `.align 64` (what nvcc emits for a __grid_constant__ CUtensorMap): one 64x64 f16 box,
# 128-byte swizzle, copied into shared memory and written out as it lies there.
import ctypes as C, struct, sys
cu = C.CDLL("libcuda.so.1")
def ck(r, what):
    if r != 0:
        s = C.c_char_p(); cu.cuGetErrorString(r, C.byref(s)); print(what, "failed:", r, s.value); sys.exit(1)
ck(cu.cuInit(0), "init")
dev = C.c_int(); ck(cu.cuDeviceGet(C.byref(dev), 0), "device")
ctx = C.c_void_p(); ck(cu.cuDevicePrimaryCtxRetain(C.byref(ctx), dev), "ctx"); ck(cu.cuCtxSetCurrent(ctx), "set")
mod = C.c_void_p(); data = open("tma.cubin", "rb").read()
ck(cu.cuModuleLoadData(C.byref(mod), data), "load")
COLS, ROWS = 256, 128
src = C.c_uint64(); ck(cu.cuMemAlloc_v2(C.byref(src), COLS * ROWS * 2), "alloc")
host = (C.c_uint16 * (COLS * ROWS))(*[(r * COLS + c) & 0xFFFF for r in range(ROWS) for c in range(COLS)])
ck(cu.cuMemcpyHtoD_v2(src, host, COLS * ROWS * 2), "h2d")
out = C.c_uint64(); ck(cu.cuMemAlloc_v2(C.byref(out), 8192), "alloc out")
tmap = (C.c_uint64 * 16)()
gdim = (C.c_uint64 * 2)(COLS, ROWS); gstride = (C.c_uint64 * 1)(COLS * 2)
box = (C.c_uint32 * 2)(64, 64); estr = (C.c_uint32 * 2)(1, 1)
ck(cu.cuTensorMapEncodeTiled(tmap, 6, 2, C.c_void_p(src.value), gdim, gstride, box, estr, 0, 3, 0, 0), "encode")
ok = True
for name in [a.encode() for a in sys.argv[1:]]:
    f = C.c_void_p(); ck(cu.cuModuleGetFunction(C.byref(f), mod, name), "function")
    for (x, y) in ((64, 32), (192, 64)):
        ck(cu.cuMemsetD8_v2(out, 0xFF, 8192), "memset")
        cx, cy = C.c_uint32(x), C.c_uint32(y)
        params = (C.c_void_p * 4)(C.cast(tmap, C.c_void_p), C.cast(C.pointer(cx), C.c_void_p), C.cast(C.pointer(cy), C.c_void_p), C.cast(C.pointer(out), C.c_void_p))
        ck(cu.cuLaunchKernel(f, 1, 1, 1, 128, 1, 1, 0, None, params, None), "launch")
        r = cu.cuCtxSynchronize()
        if r != 0:
            s = C.c_char_p(); cu.cuGetErrorString(r, C.byref(s)); print(name.decode(), x, y, "kernel error", r, s.value); ok = False; break
        got = (C.c_uint16 * 4096)(); ck(cu.cuMemcpyDtoH_v2(got, out, 8192), "d2h")
        bad = 0
        for row in range(64):
            for col in range(64):
                chunk, within = col // 8, col % 8
                offset = row * 64 + ((chunk ^ (row % 8)) * 8) + within
                want = ((y + row) * COLS + (x + col)) & 0xFFFF
                if got[offset] != want: bad += 1
        print(name.decode(), "box at", (x, y), "mismatches with the 128-byte swizzle:", bad, "of 4096")
        ok &= bad == 0
print("PASS" if ok else "FAIL")
