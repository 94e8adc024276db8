#include "server/http/memory_trim.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace spillway::server {

void release_freed_heap_memory() {
#if defined(__GLIBC__)
  ::malloc_trim(0);
#endif
}

}  // namespace spillway::server
