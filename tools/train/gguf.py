"""A small GGUF v3 reader and writer (numpy only), for the models tools/train exports.

Writer: metadata (u8..f64, bool, string, arrays of those) and F32 / F16 tensors, data
aligned to 32 bytes (`general.alignment`). Shapes are given in numpy order (outermost
first); the file stores ggml `ne` order (innermost first), as llama.cpp does, so a
PyTorch Linear weight [out, in] is written as-is and reads as ne = {in, out}.
Reader: enough to list metadata and tensors and to load F32/F16 data back.
"""
import struct

import numpy as np

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
ALIGNMENT = 32

# gguf value types
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, \
    T_ARRAY, T_UINT64, T_INT64, T_FLOAT64 = range(13)
_SCALAR_FMT = {T_UINT8: "<B", T_INT8: "<b", T_UINT16: "<H", T_INT16: "<h", T_UINT32: "<I",
               T_INT32: "<i", T_FLOAT32: "<f", T_BOOL: "<?", T_UINT64: "<Q", T_INT64: "<q",
               T_FLOAT64: "<d"}
# ggml tensor types
GGML_F32, GGML_F16 = 0, 1


class U32(int):
    """Marks an int to be stored as uint32 (default for ints is int32... see _type_of)."""


class F32(float):
    pass


def _type_of(v):
    if isinstance(v, bool):
        return T_BOOL
    if isinstance(v, U32):
        return T_UINT32
    if isinstance(v, int):
        return T_INT32 if -2**31 <= v < 2**31 else T_INT64
    if isinstance(v, float):
        return T_FLOAT32
    if isinstance(v, str):
        return T_STRING
    raise TypeError(f"unsupported metadata value {v!r}")


def _pack_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _pack_value(t, v):
    if t == T_STRING:
        return _pack_string(v)
    return struct.pack(_SCALAR_FMT[t], v)


class GGUFWriter:
    def __init__(self):
        self.kv = []       # (key, type, value, elem_type)
        self.tensors = []  # (name, np.ndarray, ggml_type)

    def add(self, key, value, array_type=None):
        if isinstance(value, (list, tuple)):
            et = array_type if array_type is not None else _type_of(value[0])
            self.kv.append((key, T_ARRAY, list(value), et))
        else:
            self.kv.append((key, array_type if array_type is not None else _type_of(value),
                            value, None))

    def add_tensor(self, name, array, f16=False):
        a = np.ascontiguousarray(array, dtype=np.float16 if f16 else np.float32)
        self.tensors.append((name, a, GGML_F16 if f16 else GGML_F32))

    def write(self, path):
        out = bytearray()
        out += GGUF_MAGIC + struct.pack("<IQQ", GGUF_VERSION, len(self.tensors), len(self.kv))
        for key, t, v, et in self.kv:
            out += _pack_string(key) + struct.pack("<I", t)
            if t == T_ARRAY:
                out += struct.pack("<IQ", et, len(v))
                for x in v:
                    out += _pack_value(et, x)
            else:
                out += _pack_value(t, v)
        offset = 0
        offsets = []
        for name, a, gt in self.tensors:
            ne = list(reversed(a.shape)) if a.ndim else [1]
            out += _pack_string(name) + struct.pack("<I", len(ne))
            out += struct.pack(f"<{len(ne)}Q", *ne) + struct.pack("<IQ", gt, offset)
            offsets.append(offset)
            offset += (a.nbytes + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
        out += b"\0" * (-len(out) % ALIGNMENT)
        for (name, a, gt), off in zip(self.tensors, offsets):
            out += a.tobytes()
            out += b"\0" * (-len(out) % ALIGNMENT)
        with open(path, "wb") as f:
            f.write(out)


class GGUFReader:
    def __init__(self, path):
        self.data = open(path, "rb").read()
        self.pos = 0
        if self.data[:4] != GGUF_MAGIC:
            raise ValueError(f"{path}: not a GGUF file")
        self.pos = 4
        self.version, n_tensors, n_kv = struct.unpack_from("<IQQ", self.data, self.pos)
        self.pos += 20
        self.metadata = {}
        for _ in range(n_kv):
            key = self._string()
            (t,) = self._unpack("<I")
            self.metadata[key] = self._value(t)
        self.tensor_info = {}
        for _ in range(n_tensors):
            name = self._string()
            (nd,) = self._unpack("<I")
            ne = self._unpack(f"<{nd}Q")
            gt, off = self._unpack("<IQ")
            self.tensor_info[name] = (list(ne), gt, off)
        align = self.metadata.get("general.alignment", ALIGNMENT)
        self.data_start = (self.pos + align - 1) // align * align

    def _unpack(self, fmt):
        v = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def _string(self):
        (n,) = self._unpack("<Q")
        s = self.data[self.pos:self.pos + n].decode("utf-8", "replace")
        self.pos += n
        return s

    def _value(self, t):
        if t == T_STRING:
            return self._string()
        if t == T_ARRAY:
            et, n = self._unpack("<IQ")
            return [self._value(et) for _ in range(n)]
        return self._unpack(_SCALAR_FMT[t])[0]

    def tensor(self, name):
        ne, gt, off = self.tensor_info[name]
        dtype = {GGML_F32: np.float32, GGML_F16: np.float16}.get(gt)
        if dtype is None:
            raise ValueError(f"{name}: ggml type {gt} is not F32/F16")
        count = int(np.prod(ne))
        a = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.data_start + off)
        return a.reshape(list(reversed(ne))).astype(np.float32)


if __name__ == "__main__":
    import sys
    r = GGUFReader(sys.argv[1])
    for k, v in r.metadata.items():
        if isinstance(v, list) and len(v) > 8:
            v = f"[{len(v)} items: {v[:4]} ...]"
        print(f"{k} = {v}")
    for name, (ne, gt, off) in r.tensor_info.items():
        print(f"{name} ne={ne} type={gt}")
