// Removed once the kernel sources land.
