// The thread pool every bench_kernels benchmark runs on: SPILLWAY_BENCH_THREADS threads, or
// the physical core count. Created on first use; call from the benchmark thread.
#pragma once

#include "kernels/thread_pool.h"

namespace spillway::kernels {

ThreadPool& bench_pool();

}  // namespace spillway::kernels
