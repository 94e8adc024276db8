// The Tiled layout of Q4_K / Q5_K / Q6_K weights (kernel_table.h): packing row-major rows
// into tiles (retile_in_place at load) and reading one row's block back out of a tile (the
// scalar reference kernels and the tests).
#include <cassert>
#include <cstring>

#include "kernels/kernel_table.h"

namespace spillway::kernels {

namespace {

// A field of ggml's block struct: byte offset, size, and the unit a tile interleaves it by.
struct Field {
  int offset, bytes, unit;
};
struct Fields {
  Field f[5];
  int n = 0;
};

Fields fields_of(DType t) {
  switch (t) {
    case DType::Q4_K: return {{{0, 2, 2}, {2, 2, 2}, {4, 12, 4}, {16, 128, 4}}, 4};
    case DType::Q5_K: return {{{0, 2, 2}, {2, 2, 2}, {4, 12, 4}, {16, 32, 4}, {48, 128, 4}}, 5};
    case DType::Q6_K: return {{{0, 128, 4}, {128, 64, 4}, {192, 16, 1}, {208, 2, 2}}, 4};
    default: return {};
  }
}

}  // namespace

bool has_kquant_tiles(DType t) { return fields_of(t).n > 0; }

void pack_kquant_tile(DType t, const uint8_t* rows, size_t row_bytes, int64_t nb, uint8_t* tile) {
  const Fields fl = fields_of(t);
  assert(fl.n > 0);
  const size_t bb = size_t(block_bytes(t));
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* out = tile + b * kTileRows * bb;
    for (int f = 0; f < fl.n; ++f) {
      const Field& fd = fl.f[f];
      for (int k = 0; k < fd.bytes / fd.unit; ++k) {
        for (int r = 0; r < kTileRows; ++r) {
          std::memcpy(out + kTileRows * fd.offset + (k * kTileRows + r) * fd.unit,
                      rows + r * row_bytes + b * bb + fd.offset + k * fd.unit, size_t(fd.unit));
        }
      }
    }
  }
}

void kquant_tile_row_block(DType t, const uint8_t* tile_block, int r, uint8_t* block) {
  const Fields fl = fields_of(t);
  assert(fl.n > 0);
  for (int f = 0; f < fl.n; ++f) {
    const Field& fd = fl.f[f];
    for (int k = 0; k < fd.bytes / fd.unit; ++k) {
      std::memcpy(block + fd.offset + k * fd.unit, tile_block + kTileRows * fd.offset + (k * kTileRows + r) * fd.unit,
                  size_t(fd.unit));
    }
  }
}

}  // namespace spillway::kernels
