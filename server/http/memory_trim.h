// Giving freed heap memory back to the operating system after a large request (issue #20).
//
// glibc's malloc keeps freed memory in the arena of the thread that allocated it: a 15 MB
// request body's JSON values, chat-template copies and tokenizer structures (hundreds of MB
// at the peak) stayed in the HTTP threads' arenas after the request (RSS 270 MB after three
// such requests, 15 MB idle). The HTTP server calls this when the exchange of a request whose
// body is at least kTrimAfterBodyBytes ends; small requests never pay for it.
//
// Thread contract: any thread (malloc_trim locks each arena in turn). A no-op without glibc.
#pragma once

#include <cstddef>

namespace spillway::server {

inline constexpr size_t kTrimAfterBodyBytes = size_t{1} << 20;

// malloc_trim(0): returns the free memory of every arena (whole free pages inside them too).
void release_freed_heap_memory();

}  // namespace spillway::server
