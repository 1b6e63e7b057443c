// The order in which a grid's blocks take the tiles of a 2-D tensor (shared by the FP8 128x128 tile
// and the FP4 64x128 row + column tile). With a transposed copy, blocks walk groups of `group_rows`
// tile rows column by column: the blocks resident at once then cover group_rows x (a few) tiles, so
// both the input rows and the transposed output rows are touched in long runs. Plain row-major order
// (group_rows 0) writes the transposed rows in one tile's worth of bytes each, spread over the whole
// output once cols is large. Private to src/cuda.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace nibble::cuda::tile_walk {

struct TileCoord {
  int64_t tr, tc;  // tile row and tile column
};

// Tile of linear block b in a (tiles_r x tiles_c) tiling. 32-bit arithmetic (a grid has < 2^31
// blocks): 64-bit division is a long subroutine.
__device__ __forceinline__ TileCoord tile_coord(uint32_t b, uint32_t tiles_r, uint32_t tiles_c, uint32_t group_rows) {
  if (group_rows == 0) return {b / tiles_c, b % tiles_c};
  const uint32_t per_group = group_rows * tiles_c;
  const uint32_t first = b / per_group * group_rows, in = b % per_group;
  const uint32_t n = min(group_rows, tiles_r - first);  // the last group may be shorter
  return {first + in % n, in / n};
}

// The tile of this block in a (tiles_c, tiles_r) grid.
__device__ __forceinline__ TileCoord block_tile(uint32_t group_rows) {
  return tile_coord(blockIdx.y * gridDim.x + blockIdx.x, gridDim.y, gridDim.x, group_rows);
}

}  // namespace nibble::cuda::tile_walk
