import CJemalloc
import Foundation

/// The memory allocator of this process.
///
/// `push-relay` is linked with jemalloc (the `CJemalloc` module), ahead of the C library, so
/// jemalloc serves every `malloc` of the process: Swift's objects, SwiftNIO's buffers, libcurl's
/// and libpq's memory. At 64 and 512 webhook connections that took about 8 % off the relay's CPU
/// per notification against glibc's allocator (docs/benchmarks.md, "jemalloc").
enum Allocator {
    /// jemalloc's version when jemalloc serves this process's allocations, `nil` when another
    /// allocator does (the program was started with a `LD_PRELOAD`ed one, say).
    static let jemalloc: String? = {
        var version: UnsafePointer<CChar>?
        var size = MemoryLayout<UnsafePointer<CChar>?>.size
        guard mallctl("version", &version, &size, nil, 0) == 0, let version else { return nil }
        // jemalloc counts what each thread allocates through it; an allocation it does not see was
        // served by another allocator, whatever is linked.
        let before = allocatedByThisThread()
        let probe = UnsafeMutableRawPointer.allocate(byteCount: 4096, alignment: 16)
        let after = allocatedByThisThread()
        probe.deallocate()
        guard let before, let after, after &- before >= 4096 else { return nil }
        return String(cString: version)
    }()

    /// One line for `push-relay version` and the start-up log.
    static var description: String {
        if let jemalloc { return "jemalloc \(jemalloc)" }
        return "not jemalloc (jemalloc is linked, but another allocator serves this process's allocations)"
    }

    private static func allocatedByThisThread() -> UInt64? {
        var bytes: UInt64 = 0
        var size = MemoryLayout<UInt64>.size
        return mallctl("thread.allocated", &bytes, &size, nil, 0) == 0 ? bytes : nil
    }

    /// Settings for glibc's allocator, when it is the one serving allocations.
    ///
    /// glibc gives each thread that allocates under contention an arena of its own, up to eight
    /// per core, and memory freed in one is not reused by the others: the relay's many threads
    /// (SwiftNIO's, the concurrency pool's, libcurl's, libpq's) then hold far more than they use.
    /// Two arenas kept the relay under 100 MB at 512 connections at no measured CPU cost
    /// (docs/benchmarks.md). `MALLOC_ARENA_MAX` in the environment, which glibc reads itself, wins.
    static func configure() {
        #if canImport(Glibc)
        guard jemalloc == nil else { return }
        // mallopt(M_ARENA_MAX, 2); malloc.h is not part of Swift's Glibc module, so it is looked up.
        typealias Mallopt = @convention(c) (Int32, Int32) -> Int32
        let arenaMax: Int32 = -8  // M_ARENA_MAX
        if ProcessInfo.processInfo.environment["MALLOC_ARENA_MAX"] == nil, let symbol = dlsym(nil, "mallopt") {
            _ = unsafeBitCast(symbol, to: Mallopt.self)(arenaMax, 2)
        }
        #endif
    }
}
