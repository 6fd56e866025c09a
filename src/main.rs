//! The binary only turns the command line into a call into the library, after telling
//! the allocator to give freed memory back.

fn main() -> std::process::ExitCode {
    allocator::give_back_freed_memory();
    mimeref_milter::main()
}

/// glibc's malloc keeps freed memory for reuse: its mmap threshold rises to the size
/// of the largest buffer freed (up to 32 MiB), after which buffers of read-back
/// messages come from the arenas and stay there when freed. Under a load of 20 MB
/// messages the daemon then held 263–458 MiB against SECURITY.md's 152 MiB, and in a
/// cgroup sized by that formula it was OOM-killed in 2 of 3 runs. A fixed threshold of
/// 1 MiB serves every buffer above it with its own mapping, returned to the kernel
/// when freed; the arenas keep only small allocations. BENCHMARKS.md ("Memory under a
/// cgroup limit") has the figures. The library forbids unsafe code; this is the one
/// call that needs it, made before any thread starts.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod allocator {
    /// Buffers from this size on are mappings of their own (and 64 KiB body chunks,
    /// the most numerous allocation, stay below it).
    const MMAP_THRESHOLD: libc::c_int = 1 << 20;
    /// Free memory at the top of an arena above this is returned to the kernel.
    const TRIM_THRESHOLD: libc::c_int = 1 << 20;

    pub fn give_back_freed_memory() {
        // SAFETY: mallopt only sets allocator parameters; called before any other
        // thread exists, as glibc asks.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
            libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
        }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
mod allocator {
    /// Other allocators (musl's, the BSDs') return large freed buffers on their own.
    pub fn give_back_freed_memory() {}
}
